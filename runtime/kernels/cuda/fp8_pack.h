// fp8_pack.h - packing a GEMM's operands for cuBLASLt's fp8 block scaling
// (fp8.cu): shared by the fp8 GEMM (gemm.cu) and its host emulation.

#ifndef STEPC_RUNTIME_KERNELS_CUDA_FP8_PACK_H_
#define STEPC_RUNTIME_KERNELS_CUDA_FP8_PACK_H_

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "runtime/kernels/cuda/cuda_kernels.h"
#include "runtime/kernels/cuda/launch_config.h"

namespace stepc::cuda {

// STEPC_FP8_GEMMS=0: every fp8 GEMM runs the bf16 GEMM of its values (the
// same step, timed or compared with and without the fp8 tensor cores).
inline bool Fp8GemmsOff() {
  static const bool off = [] {
    const char* v = std::getenv("STEPC_FP8_GEMMS");
    return v && std::strcmp(v, "0") == 0;
  }();
  return off;
}

// x as [rows, k] (f32 or bf16, `in_type`; stored [rows, k], or [k, rows]
// if `stored_kr`) into fp8 bytes [rows, k] and a scale per 1x128 block
// along k at scales[kb * rows + r]. Each block takes the power of two that
// fits its own largest magnitude (the quantizer's rule), so values
// step.quantize_fp8 rounded in a tile holding the block are packed exactly.
int PackFp8Rows(stepc_cuda_ctx* ctx, const void* x, int in_type, int64_t rows, int64_t k,
                bool stored_kr, int format, uint8_t* out, float* scales);

// op(x) as [n, k] (x stored [n, k] if `stored_nk`, else [k, n]) into fp8
// bytes [n, k] and a scale per 128x128 block at scales[nb * scale_ld + kb].
int PackFp8Blocks(stepc_cuda_ctx* ctx, const void* x, int in_type, int64_t n, int64_t k,
                  bool stored_nk, int format, uint8_t* out, float* scales, int64_t scale_ld);

// The fp8 GEMMs stepc_cuda_matmul_fp8 ran from packed fp8 operands (on
// cuBLASLt's fp8 tensor cores, or the emulation's stand-in) since the
// process started, not counting those it ran in bf16: what tells a test
// the fp8 path from its fallback.
int64_t Fp8GemmsRun();
// Counts one (stepc_cuda_matmul_fp8, once it ran from packed operands).
void CountFp8GemmRun();

// A GEMM's BGRAD sums where cuBLASLt's epilogue does not give them (and an
// fp8 GEMM's always: the sums of A's own values): out[m] = the sum over k of
// op_a(A)[m, k], by the column-sum reduction the step would otherwise run
// (deterministic), its partials in the GEMM workspace.
int BiasGradOf(stepc_cuda_ctx* ctx, const void* a, int in_type, int64_t m, int64_t k,
               bool transpose_a, float* out);

// Packed bytes [lines, k] with scales [k / 128, lines] (1x128 blocks; or,
// `ld` > 0, 128x128 blocks at [line / 128][k / 128] of a table `ld` wide) as
// bf16 values (exact).
int UnpackFp8(stepc_cuda_ctx* ctx, const uint8_t* bytes, const float* scales, int64_t lines,
              int64_t k, int format, int64_t ld, __nv_bfloat16* out);

// An fp8 GEMM's packed operands in its scratch.
struct Fp8Packed {
  uint8_t *a, *b;            // [m, k] and [n, k] bytes
  float *a_scales, *b_scales;
  int64_t b_scale_ld;        // 128x128 blocks: K-blocks padded to 4
};
// Both operands of an fp8 GEMM of op(A) [m, k] and op(B) [k, n] into
// `scratch`, laid out by launch_config.h's PlanFp8Gemm: A in 1x128 blocks,
// B in 128x128 blocks or, if `b_vector`, 1x128 blocks along k as A. An
// operand packed already (type STEPC_CUDA_FP8) is pointed to as it is, its
// scales null in `packed` (the caller's).
int PackFp8Operands(stepc_cuda_ctx* ctx, const void* a, int a_type, const void* b, int b_type,
                    int64_t m, int64_t n, int64_t k, bool transpose_a, bool transpose_b,
                    int a_format, int b_format, bool b_vector, void* scratch,
                    Fp8Packed* packed);

// What stepc_cuda_matmul_fp8(_packed) runs where the fp8 tensor cores do
// not: the bf16 GEMM of the same values (packed operands unpacked into
// `scratch` first: PlanFp8Bf16Operands; the epilogue no longer BGRAD).
int Fp8ValuesInBf16(stepc_cuda_ctx* ctx, const void* a, const float* a_scales, const void* b,
                    const float* b_scales, void* c, int64_t batch, int64_t m, int64_t n,
                    int64_t k, int transpose_a, int transpose_b, int shared_rhs, int a_type,
                    int b_type, int out_type, const float* bias, int epilogue, void* aux,
                    int a_format, int b_format, int b_vector, void* scratch);

}  // namespace stepc::cuda

#endif  // STEPC_RUNTIME_KERNELS_CUDA_FP8_PACK_H_
