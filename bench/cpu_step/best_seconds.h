// The probes' timing rule: the least wall time of `repeats` calls, after
// `warmups` untimed ones (first-touch page faults, oneDNN making its
// primitive, OpenBLAS's buffers).

#ifndef STEPC_BENCH_CPU_STEP_BEST_SECONDS_H_
#define STEPC_BENCH_CPU_STEP_BEST_SECONDS_H_

#include <algorithm>
#include <chrono>

namespace stepc::bench {

template <typename Run>
double BestSeconds(int warmups, int repeats, Run run) {
  double best = 1e30;
  for (int r = 0; r < warmups + repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    run();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r >= warmups) best = std::min(best, s);
  }
  return best;
}

}  // namespace stepc::bench

#endif  // STEPC_BENCH_CPU_STEP_BEST_SECONDS_H_
