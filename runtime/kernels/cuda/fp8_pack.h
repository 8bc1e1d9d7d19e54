// fp8_pack.h - packing a GEMM's operands for cuBLASLt's fp8 block scaling
// (fp8.cu): shared by the fp8 GEMM (gemm.cu) and its host emulation.

#ifndef STEPC_RUNTIME_KERNELS_CUDA_FP8_PACK_H_
#define STEPC_RUNTIME_KERNELS_CUDA_FP8_PACK_H_

#include <cstdint>

#include "runtime/kernels/cuda/cuda_kernels.h"

namespace stepc::cuda {

// x [rows, k] row-major (f32 or bf16, `in_type`) into fp8 bytes [rows, k]
// and a scale per 1x128 block along k at scales[kb * rows + r]. Each block
// takes the power of two that fits its own largest magnitude (the
// quantizer's rule), so values step.quantize_fp8 rounded in a tile holding
// the block are packed exactly.
int PackFp8Rows(stepc_cuda_ctx* ctx, const void* x, int in_type, int64_t rows, int64_t k,
                int format, uint8_t* out, float* scales);

// op(x) as [n, k] (x stored [n, k] if `stored_nk`, else [k, n]) into fp8
// bytes [n, k] and a scale per 128x128 block at scales[nb * scale_ld + kb].
int PackFp8Blocks(stepc_cuda_ctx* ctx, const void* x, int in_type, int64_t n, int64_t k,
                  bool stored_nk, int format, uint8_t* out, float* scales, int64_t scale_ld);

}  // namespace stepc::cuda

#endif  // STEPC_RUNTIME_KERNELS_CUDA_FP8_PACK_H_
