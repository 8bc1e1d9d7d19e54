// bf16 GEMMs through oneDNN's matmul primitive: it picks AMX tiles,
// AVX512-BF16 dot products or an emulation, whichever the CPU has, at run
// time. OpenBLAS (Debian's build) has no bf16 GEMM; oneDNN is the library
// PyTorch's own CPU bf16 path uses.
//
// A primitive is made once per shape and kept: the step calls the same
// shapes every time, and making one costs milliseconds. Where oneDNN has no
// bf16 matmul for this CPU (one without AVX-512, say), the operands are
// widened and the f32 GEMM runs: the same products of bf16 values, no gain.

#include <cstdio>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include <dnnl.hpp>

#include "runtime/kernels/cpu/cpu_kernels.h"

namespace {

using Dims = dnnl::memory::dims;
using Type = dnnl::memory::data_type;

// (batch, m, n, k, transpose_a, transpose_b, shared_rhs, c_f32)
using GemmKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int, int, int, int>;

struct Gemm {
  dnnl::memory::desc a, b, c;
  dnnl::matmul matmul;
  // False where oneDNN could make no bf16 matmul on this CPU.
  bool available = false;
};

dnnl::engine& Engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Row-major [batch, rows, cols] stored transposed ([batch, cols, rows]) or not.
dnnl::memory::desc Operand(int64_t batch, int64_t rows, int64_t cols, bool transposed,
                           Type type) {
  return dnnl::memory::desc(Dims{batch, rows, cols}, type,
                            transposed ? Dims{rows * cols, 1, rows} : Dims{rows * cols, cols, 1});
}

const Gemm& GemmFor(const GemmKey& key) {
  static std::mutex mutex;
  static std::map<GemmKey, Gemm> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const auto [batch, m, n, k, ta, tb, shared, c_f32] = key;
  Gemm gemm;
  gemm.a = Operand(batch, m, k, ta, Type::bf16);
  // A weight shared by every batch entry broadcasts over the batch dim.
  gemm.b = Operand(shared ? 1 : batch, k, n, tb, Type::bf16);
  gemm.c = Operand(batch, m, n, false, c_f32 ? Type::f32 : Type::bf16);
  try {
    gemm.matmul = dnnl::matmul(
        dnnl::matmul::primitive_desc(dnnl::matmul::desc(gemm.a, gemm.b, gemm.c), Engine()));
    gemm.available = true;
  } catch (const dnnl::error&) {
    // Said once per process: the step trains, but gains nothing over fp32.
    static std::once_flag told;
    std::call_once(told, [] {
      std::fprintf(stderr,
                   "stepc: note: this CPU has no bf16 dot products (AVX512-BF16 or AMX) that "
                   "oneDNN can use: bf16 GEMMs run as f32 GEMMs on widened operands, no faster "
                   "than an fp32 step\n");
    });
  }
  return cache.emplace(key, std::move(gemm)).first->second;
}

// The f32 GEMM on widened operands, C rounded back unless it is f32.
void WidenedMatmul(const stepc_bf16* a, const stepc_bf16* b, void* c, int c_f32, int64_t batch,
                   int64_t m, int64_t n, int64_t k, int transpose_a, int transpose_b,
                   int shared_rhs) {
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
  if (c_f32) return;
  stepc_bf16* out = static_cast<stepc_bf16*>(c);
  for (int64_t i = 0; i < count; ++i) out[i] = stepc_f32_to_bf16(fc[i]);
}

}  // namespace

extern "C" void stepc_cpu_matmul_bf16(const stepc_bf16* a, const stepc_bf16* b, void* c,
                                      int c_f32, int64_t batch, int64_t m, int64_t n,
                                      int64_t k, int transpose_a, int transpose_b,
                                      int shared_rhs) {
  // [batch, M, K] x [K, N] with a shared B is one [batch·M, K] x [K, N].
  if (shared_rhs && !transpose_a && batch > 1) {
    m *= batch;
    batch = 1;
  }
  const Gemm& gemm = GemmFor({batch, m, n, k, transpose_a, transpose_b, shared_rhs, c_f32});
  if (!gemm.available) {
    WidenedMatmul(a, b, c, c_f32, batch, m, n, k, transpose_a, transpose_b, shared_rhs);
    return;
  }
  dnnl::stream stream(Engine());
  dnnl::memory a_mem(gemm.a, Engine(), const_cast<stepc_bf16*>(a));
  dnnl::memory b_mem(gemm.b, Engine(), const_cast<stepc_bf16*>(b));
  dnnl::memory c_mem(gemm.c, Engine(), c);
  gemm.matmul.execute(stream, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem},
                               {DNNL_ARG_DST, c_mem}});
  stream.wait();
}
