// Batched matmuls on strided operands through oneDNN (AMX tiles, AVX512-BF16
// dot products or f32, whichever the CPU has, chosen by oneDNN at run time).
// The bf16 GEMMs and bf16 attention call it; dnnl.hpp stays out of their
// headers.
#ifndef STEPC_RUNTIME_KERNELS_CPU_ONEDNN_MATMUL_H_
#define STEPC_RUNTIME_KERNELS_CPU_ONEDNN_MATMUL_H_

#include <cstdint>
#include <vector>

namespace stepc::onednn {

enum class Type { kBf16, kF32 };

// A strided tensor: element [i0, .., in] at sum(i_d * strides[d]). The last
// two dims are the matrix; the rest are batch dims (a dim of 1 in the
// weights broadcasts over the source's).
struct Operand {
  std::vector<int64_t> dims, strides;
  Type type;
};

// c (+)= a @ b (+ bias, f32 along c's last dim, added to the f32 sum before
// it is stored as c's type). Returns false, computing nothing, where oneDNN
// has no matmul for these operands on this CPU (the caller falls back). Each
// layout's primitive is made once and kept (making one costs milliseconds;
// a step calls the same layouts every time).
bool Matmul(const Operand& a, const void* a_data, const Operand& b, const void* b_data,
            const Operand& c, void* c_data, bool accumulate, const float* bias = nullptr);

// c = a @ b for one matrix of each (stored transposed where said), f32 c,
// where K is far above M and N (a weight gradient, dW = dYᵀ·X, K every
// token): oneDNN finds too few output blocks there to give each thread
// work (128×128×4096 ran on one of two threads). K is split into one part
// per thread, the parts run as one batched matmul into f32 partial sums,
// added in order (deterministic). False, computing nothing, where the
// shape does not call for it or oneDNN has no primitive.
bool SplitKMatmul(Type type, const void* a, const void* b, float* c, int64_t m, int64_t n,
                  int64_t k, bool transpose_a, bool transpose_b);

// c (+)= op(a) @ op(b), f32 and dense, where m or k is only known per call
// (an expert's rows, which change every step): one primitive per shape of
// the rest, with that dim a runtime dimension, so that no step makes a new
// one (a primitive per row count held 150 MB for gpt-small's experts).
// op(a) is [m, k], stored transposed ([k, m]) if transpose_a; op(b) is
// [k, n], stored [n, k] if transpose_b. False, computing nothing, where
// oneDNN has no primitive for it (the caller falls back).
bool VariableMatmul(const float* a, bool transpose_a, const float* b, bool transpose_b, float* c,
                    int64_t m, int64_t n, int64_t k, bool runtime_m, bool accumulate);

// Whether oneDNN runs f32 matmuls on its AVX-512 brgemm kernels here (or,
// on a CPU without AVX-512, on its older gemm:jit ones).
bool HasF32Brgemm();

// Row-major [batch, rows, cols], or stored transposed ([batch, cols, rows]).
Operand Matrices(int64_t batch, int64_t rows, int64_t cols, bool transposed, Type type);

}  // namespace stepc::onednn

#endif  // STEPC_RUNTIME_KERNELS_CPU_ONEDNN_MATMUL_H_
