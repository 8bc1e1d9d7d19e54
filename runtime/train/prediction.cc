#include "runtime/train/prediction.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace stepc {
namespace {

// The best of a few copies of 64 MiB (well past any cache) split among
// `threads` threads, in GB/s of traffic (bytes read + bytes written).
double ProbeCopyRate(int threads) {
  constexpr size_t kBytes = size_t{64} << 20;
  std::vector<char> src(kBytes, 1), dst(kBytes, 0);
  threads = std::max(1, threads);
  double best = 1e30;
  for (int round = 0; round < 6; ++round) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> workers;
    const size_t part = kBytes / threads;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        const size_t from = t * part, size = t + 1 == threads ? kBytes - from : part;
        std::memcpy(dst.data() + from, src.data() + from, size);
      });
    for (std::thread& w : workers) w.join();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (round > 0) best = std::min(best, s);  // the first touches the pages
  }
  return 2.0 * kBytes / best / 1e9;
}

}  // namespace

StepPrediction PredictStep(const Module& module, const PeakRate& peak, int threads) {
  StepPrediction p;
  if (module.is_cuda() || peak.gflops <= 0 || !module.info().report_json) return p;
  const nlohmann::json report =
      nlohmann::json::parse(module.info().report_json, nullptr, /*allow_exceptions=*/false);
  if (!report.is_object() || !report.contains("executed_flops_per_step") ||
      !report.contains("memory_bound_bytes_per_step"))
    return p;
  const std::string key = CpuCacheKey(std::to_string(threads), "copy GB/s");
  const CachedRate rate = CachedProbe(key, [&] { return ProbeCopyRate(threads); });
  if (rate.value <= 0) return p;
  p.memory_gbps = rate.value;
  p.memory_source = rate.cached_in.empty() ? "copy probe, 64 MiB"
                                           : "copy probe, cached in " + rate.cached_in;
  p.gemm_seconds = report["executed_flops_per_step"].get<double>() / (peak.gflops * 1e9);
  p.memory_seconds = report["memory_bound_bytes_per_step"].get<double>() / (p.memory_gbps * 1e9);
  if (report.contains("predicted_exposed_comm_seconds") &&
      report["predicted_exposed_comm_seconds"].is_number())
    p.comm_seconds = report["predicted_exposed_comm_seconds"].get<double>();
  p.seconds = p.gemm_seconds + p.memory_seconds + p.comm_seconds;
  p.known = true;
  return p;
}

}  // namespace stepc
