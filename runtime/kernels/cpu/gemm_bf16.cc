// bf16 GEMMs through oneDNN's matmul primitive: it picks AMX tiles,
// AVX512-BF16 dot products or an emulation, whichever the CPU has, at run
// time. OpenBLAS (Debian's build) has no bf16 GEMM; oneDNN is the library
// PyTorch's own CPU bf16 path uses.
//
// Where oneDNN has no bf16 matmul for this CPU (one without AVX-512, say),
// the operands are widened and the f32 GEMM runs: the same products of bf16
// values, no gain.

#include <cstdio>
#include <mutex>
#include <vector>

#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/kernels/cpu/onednn_matmul.h"

namespace {

// The f32 GEMM on widened operands, the bias added, C rounded back unless
// it is f32.
void WidenedMatmul(const stepc_bf16* a, const stepc_bf16* b, void* c, int c_f32, int64_t batch,
                   int64_t m, int64_t n, int64_t k, int transpose_a, int transpose_b,
                   int shared_rhs, const float* bias) {
  thread_local std::vector<float> wide_a, wide_b, wide_c;
  auto widen = [](const stepc_bf16* in, int64_t count, std::vector<float>& out) {
    out.resize(count);
    for (int64_t i = 0; i < count; ++i) out[i] = stepc_bf16_to_f32(in[i]);
    return out.data();
  };
  const float* fa = widen(a, batch * m * k, wide_a);
  const float* fb = widen(b, (shared_rhs ? 1 : batch) * k * n, wide_b);
  const int64_t count = batch * m * n;
  if (!c_f32) wide_c.resize(count);
  float* fc = c_f32 ? static_cast<float*>(c) : wide_c.data();
  stepc_cpu_matmul(fa, fb, fc, batch, m, n, k, transpose_a, transpose_b, shared_rhs);
  if (bias)
    for (int64_t i = 0; i < count; ++i) fc[i] += bias[i % n];
  if (c_f32) return;
  stepc_bf16* out = static_cast<stepc_bf16*>(c);
  for (int64_t i = 0; i < count; ++i) out[i] = stepc_f32_to_bf16(fc[i]);
}

}  // namespace

extern "C" void stepc_cpu_matmul_bf16(const stepc_bf16* a, const stepc_bf16* b, void* c,
                                      int c_f32, int64_t batch, int64_t m, int64_t n,
                                      int64_t k, int transpose_a, int transpose_b,
                                      int shared_rhs, const float* bias) {
  // [batch, M, K] x [K, N] with a shared B is one [batch·M, K] x [K, N].
  if (shared_rhs && !transpose_a && batch > 1) {
    m *= batch;
    batch = 1;
  }
  using stepc::onednn::Matrices;
  using stepc::onednn::Type;
  if (batch == 1 && c_f32 && !bias &&
      stepc::onednn::SplitKMatmul(Type::kBf16, a, b, static_cast<float*>(c), m, n, k,
                                  transpose_a, transpose_b))
    return;
  // A weight shared by every batch entry broadcasts over the batch dim.
  if (stepc::onednn::Matmul(Matrices(batch, m, k, transpose_a, Type::kBf16), a,
                            Matrices(shared_rhs ? 1 : batch, k, n, transpose_b, Type::kBf16), b,
                            Matrices(batch, m, n, false, c_f32 ? Type::kF32 : Type::kBf16), c,
                            /*accumulate=*/false, bias))
    return;
  // Said once per process: the step trains, but slower than in fp32.
  static std::once_flag told;
  std::call_once(told, [] {
    std::fprintf(stderr,
                 "stepc: note: this CPU has no bf16 dot products (AVX512-BF16 or AMX) that "
                 "oneDNN can use: bf16 GEMMs run as f32 GEMMs on widened operands, and the "
                 "step is slower than an fp32 step (--precision=fp32)\n");
  });
  WidenedMatmul(a, b, c, c_f32, batch, m, n, k, transpose_a, transpose_b, shared_rhs, bias);
}
