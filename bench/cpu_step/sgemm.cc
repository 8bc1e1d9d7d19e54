// The machine's OpenBLAS sgemm rate (the OpenMP build stepc links), the
// denominator of bench/cpu_step's "fraction of sgemm".
//   sgemm [N] [repeats]   ->  {"n": N, "gflops": ...}

#include <cblas.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/cpu_step/best_seconds.h"
#include "runtime/device/cpu_threads.h"

int main(int argc, char** argv) {
  // OpenBLAS chose its kernels when this program loaded it: run again with
  // the kernels a step's runtime chooses (stepc::ChooseBlasKernels).
  if (!std::getenv("OPENBLAS_CORETYPE")) {
    stepc::ChooseBlasKernels();
    if (std::getenv("OPENBLAS_CORETYPE")) execv("/proc/self/exe", argv);
  }
  const int n = argc > 1 ? std::atoi(argv[1]) : 1024;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 20;
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
  const double best = stepc::bench::BestSeconds(/*warmups=*/2, repeats, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(),
                n, 0.0f, c.data(), n);
  });
  std::printf("{\"n\": %d, \"gflops\": %.1f}\n", n, 2.0 * n * n * n / best / 1e9);
  return 0;
}
