// gemm_layout.h - how a row-major GEMM of the step becomes cuBLASLt's
// column-major problem, as plain C++ so that the mapping is tested on any
// host (gemm_layout_test.cc runs the column-major problem literally) and is
// the one both the cuBLASLt path (gemm.cu) and the host emulation's GEMM
// (emulated/gemm.cc) execute.
//
// Row-major C[M,N] = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: B's
// memory goes in cuBLASLt's first slot, A's in the second, and C is an
// N x M column-major matrix with leading dimension N.

#ifndef STEPC_RUNTIME_KERNELS_CUDA_GEMM_LAYOUT_H_
#define STEPC_RUNTIME_KERNELS_CUDA_GEMM_LAYOUT_H_

#include <cstdint>

#include "runtime/kernels/cuda/cuda_kernels.h"

namespace stepc::cuda {

// A row-major GEMM of the step: `batch` products [M,K]x[K,N], A (and B
// unless shared) one after another.
struct GemmShape {
  int64_t batch, m, n, k;
  bool transpose_a, transpose_b, shared_rhs;
};

// One operand slot of a column-major problem: a rows x cols matrix, element
// (r, c) at r + c·ld, `batch_stride` elements to the next product; used as
// its transpose when `transposed`.
struct ColumnMajor {
  int64_t rows, cols, ld, batch_stride;
  bool transposed;
};

// D = op(first) · op(second), `batch` times.
struct ColumnMajorGemm {
  ColumnMajor first, second, result;
  int64_t batch;
};

inline ColumnMajorGemm ToColumnMajor(GemmShape g) {
  // Shared B and untransposed A: the batch is more rows of one product.
  if (g.shared_rhs && !g.transpose_a) {
    g.m *= g.batch;
    g.batch = 1;
  }
  ColumnMajorGemm p;
  p.batch = g.batch;
  // B stored row-major [K,N] is column-major [N,K]: already Bᵀ; a row-major
  // [N,K] (transpose_b) is column-major [K,N], transposed back.
  p.first = ColumnMajor{g.transpose_b ? g.k : g.n, g.transpose_b ? g.n : g.k,
                        g.transpose_b ? g.k : g.n, g.shared_rhs ? 0 : g.k * g.n, g.transpose_b};
  p.second = ColumnMajor{g.transpose_a ? g.m : g.k, g.transpose_a ? g.k : g.m,
                         g.transpose_a ? g.m : g.k, g.m * g.k, g.transpose_a};
  p.result = ColumnMajor{g.n, g.m, g.n, g.m * g.n, false};
  return p;
}

// Why a stepc_cuda_matmul call cannot take its epilogue (null: it can).
inline const char* BadEpilogue(int64_t batch, int64_t n, int out_type, const void* bias,
                               int epilogue, const void* aux) {
  if ((epilogue == STEPC_EPILOGUE_GELU || epilogue == STEPC_EPILOGUE_DGELU) &&
      (out_type != STEPC_CUDA_F32 || !aux || n % 8 != 0))
    return "a GELU epilogue needs an f32 result, an aux buffer and N divisible by 8";
  if (epilogue == STEPC_EPILOGUE_BGRAD && (batch != 1 || bias || !aux))
    return "a BGRAD epilogue needs one product, no bias and an aux buffer for the sums";
  return nullptr;
}

// Why a stepc_cuda_matmul_fp8(_packed) call's operands cannot be taken
// (null: they can): f32 or bf16 each, alike; or packed already
// (STEPC_CUDA_FP8) in the layouts the fp8 GEMM reads, with scales, beside a
// bf16 other operand.
inline const char* BadFp8Operands(int a_type, const void* a_scales, int b_type,
                                  const void* b_scales, int transpose_a, int transpose_b,
                                  int epilogue, const void* scratch) {
  auto raw = [](int t) { return t == STEPC_CUDA_F32 || t == STEPC_CUDA_BF16; };
  const bool packed_a = a_type == STEPC_CUDA_FP8, packed_b = b_type == STEPC_CUDA_FP8;
  if ((!packed_a && !raw(a_type)) || (!packed_b && !raw(b_type)))
    return "fp8 GEMM operands must be f32, bf16 or packed (STEPC_CUDA_FP8)";
  if (packed_a && (!a_scales || transpose_a || epilogue == STEPC_EPILOGUE_BGRAD))
    return "a packed A needs its scales and is read untransposed, not summed (BGRAD) by the "
           "GEMM";
  if (packed_b && (!b_scales || !transpose_b))
    return "a packed B needs its scales and is [n, k] (transpose_b)";
  if ((packed_a || packed_b) && !scratch) return "an fp8 GEMM of packed operands needs its scratch";
  if (packed_a && !packed_b && b_type != STEPC_CUDA_BF16)
    return "beside a packed A, B must be bf16";
  if (packed_b && !packed_a && a_type != STEPC_CUDA_BF16)
    return "beside a packed B, A must be bf16";
  if (!packed_a && !packed_b && a_type != b_type)
    return "an fp8 GEMM's operands must have one type";
  return nullptr;
}

}  // namespace stepc::cuda

#endif  // STEPC_RUNTIME_KERNELS_CUDA_GEMM_LAYOUT_H_
