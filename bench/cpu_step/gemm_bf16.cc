// The bf16 GEMM rate of the kernel a --precision=bf16 CPU step calls
// (stepc_cpu_matmul_bf16: oneDNN, AMX or AVX512-BF16 where the CPU has them),
// the denominator of bench/cpu_step's "fraction of bf16 GEMM".
//   bench_gemm_bf16 [N] [repeats]   ->  {"n": N, "gflops": ...}

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "runtime/kernels/cpu/cpu_kernels.h"

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 1024;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 20;
  std::vector<stepc_bf16> a(size_t(n) * n, stepc_f32_to_bf16(0.5f)),
      b(size_t(n) * n, stepc_f32_to_bf16(0.25f));
  std::vector<float> c(size_t(n) * n);
  double best = 1e30;
  for (int r = 0; r < repeats + 2; ++r) {
    auto start = std::chrono::steady_clock::now();
    stepc_cpu_matmul_bf16(a.data(), b.data(), c.data(), /*c_f32=*/1, 1, n, n, n, 0, 0, 0,
                          /*bias=*/nullptr);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r >= 2) best = std::min(best, s);  // the first two warm up (and make the primitive)
  }
  if (c[0] != 0.125f * n) {
    std::fprintf(stderr, "bench_gemm_bf16: wrong product %g (expected %g)\n", c[0], 0.125 * n);
    return 1;
  }
  std::printf("{\"n\": %d, \"gflops\": %.1f}\n", n, 2.0 * n * n * n / best / 1e9);
  return 0;
}
