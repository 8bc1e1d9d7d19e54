// The GEMM rate of the kernel a CPU step calls, the denominator of
// bench/cpu_step's "fraction of ... GEMM": --dtype=bf16 (default) times
// stepc_cpu_matmul_bf16 (oneDNN: AMX or AVX512-BF16 where the CPU has them),
// --dtype=f32 stepc_cpu_matmul (oneDNN or OpenBLAS, as gemm.cc chooses; the
// sgemm probe, bench_sgemm, is OpenBLAS alone).
//   bench_gemm [--dtype=bf16|f32] [N] [repeats]   ->  {"dtype": ..., "n": N, "gflops": ...}

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/cpu_step/best_seconds.h"
#include "runtime/kernels/cpu/cpu_kernels.h"

int main(int argc, char** argv) {
  bool f32 = false;
  int positional[2] = {1024, 20}, count = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--dtype=f32") == 0) {
      f32 = true;
    } else if (std::strcmp(argv[i], "--dtype=bf16") == 0) {
      f32 = false;
    } else if (argv[i][0] != '-' && count < 2) {
      positional[count++] = std::atoi(argv[i]);
    } else {
      std::fprintf(stderr, "usage: bench_gemm [--dtype=bf16|f32] [N] [repeats]\n");
      return 2;
    }
  }
  const int n = positional[0], repeats = positional[1];
  if (n <= 0 || repeats <= 0) {
    std::fprintf(stderr, "bench_gemm: N and repeats must be positive\n");
    return 2;
  }
  const size_t elements = size_t(n) * n;
  std::vector<float> c(elements);
  double seconds;
  if (f32) {
    std::vector<float> a(elements, 0.5f), b(elements, 0.25f);
    seconds = stepc::bench::BestSeconds(/*warmups=*/2, repeats, [&] {
      stepc_cpu_matmul(a.data(), b.data(), c.data(), 1, n, n, n, 0, 0, 0);
    });
  } else {
    std::vector<stepc_bf16> a(elements, stepc_f32_to_bf16(0.5f)),
        b(elements, stepc_f32_to_bf16(0.25f));
    seconds = stepc::bench::BestSeconds(/*warmups=*/2, repeats, [&] {
      stepc_cpu_matmul_bf16(a.data(), b.data(), c.data(), /*c_f32=*/1, 1, n, n, n, 0, 0, 0,
                            /*bias=*/nullptr);
    });
  }
  if (c[0] != 0.125f * n) {
    std::fprintf(stderr, "bench_gemm: wrong product %g (expected %g)\n", c[0], 0.125 * n);
    return 1;
  }
  std::printf("{\"dtype\": \"%s\", \"n\": %d, \"gflops\": %.1f}\n", f32 ? "f32" : "bf16", n,
              2.0 * n * n * n / seconds / 1e9);
  return 0;
}
