// The machine's memory bandwidth, STREAM-style (copy and triad over arrays
// far larger than the caches, all threads): the denominator of the GB/s the
// step's memory-bound kernels reach in bench/cpu_step's breakdown.
//   stream [MiB per array] [repeats]  ->  {"mib": M, "copy_gbps": ..., "triad_gbps": ...}

#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/cpu_step/best_seconds.h"

int main(int argc, char** argv) {
  const long mib = argc > 1 ? std::atol(argv[1]) : 256;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 10;
  const long n = mib * (1L << 20) / sizeof(float);
  std::vector<float> a(n), b(n), c(n);
#pragma omp parallel for
  for (long i = 0; i < n; ++i) a[i] = 0.0f, b[i] = 1.0f, c[i] = 2.0f;
  float* pa = a.data();
  const float *pb = b.data(), *pc = c.data();
  double copy = stepc::bench::BestSeconds(/*warmups=*/1, repeats, [&] {  // 1: first touch
#pragma omp parallel for simd
    for (long i = 0; i < n; ++i) pa[i] = pb[i];
  });
  double triad = stepc::bench::BestSeconds(/*warmups=*/1, repeats, [&] {
#pragma omp parallel for simd
    for (long i = 0; i < n; ++i) pa[i] = pb[i] + 3.0f * pc[i];
  });
  const double bytes = static_cast<double>(n) * sizeof(float);
  std::printf("{\"mib\": %ld, \"threads\": %d, \"copy_gbps\": %.1f, \"triad_gbps\": %.1f}\n", mib,
              omp_get_max_threads(), 2 * bytes / copy / 1e9, 3 * bytes / triad / 1e9);
  return a[n / 2] == 7.0f ? 0 : 1;  // 1 + 3·2: keeps the loops
}
