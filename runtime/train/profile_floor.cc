#include "runtime/train/profile_floor.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace stepc {

absl::StatusOr<std::string> ProfileFloorTable(const std::string& text, const FloorRates& rates) {
  if (rates.gflops <= 0 || rates.gbps <= 0)
    return absl::FailedPreconditionError("the peak or the memory bandwidth is unknown");
  const nlohmann::json profile = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!profile.is_object() || !profile.contains("kernels") || !profile["kernels"].is_array())
    return absl::InvalidArgumentError("not a stepc --profile table");
  const double steps = std::max(1.0, profile.value("steps", 1.0));
  struct Row {
    std::string kind;
    long long calls;
    double ms, floor_ms, flops, bytes;
  };
  std::vector<Row> rows;
  for (const nlohmann::json& k : profile["kernels"]) {
    if (!k.is_object() || !k.contains("kind") || !k.contains("seconds"))
      return absl::InvalidArgumentError("a kernel kind without its name or seconds");
    Row r{k.value("kind", std::string()), k.value("calls_per_step", 0LL),
          1e3 * k.value("seconds", 0.0) / steps, 0, k.value("flops_per_step", 0.0),
          k.value("bytes_per_step", 0.0)};
    r.floor_ms = 1e3 * std::max(r.flops / (rates.gflops * 1e9), r.bytes / (rates.gbps * 1e9));
    rows.push_back(r);
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.ms > b.ms; });
  double total = 0, floor = 0;
  for (const Row& r : rows) {
    total += r.ms;
    floor += r.floor_ms;
  }
  std::string out = absl::StrFormat(
      "stepc-run: where the step's time went (--profile), against each kind's floor at %.4g "
      "TFLOP/s and %.4g GB/s (%s)\n%-34s %6s %9s %6s %9s %8s %8s %7s\n",
      rates.gflops / 1e3, rates.gbps, rates.source, "kind", "calls", "ms/step", "share",
      "floor ms", "x floor", "TFLOP/s", "GB/s");
  for (const Row& r : rows)
    absl::StrAppendFormat(
        &out, "%-34s %6d %9.3f %5.1f%% %9.3f %8.1f %8.2f %7.0f\n", r.kind.substr(0, 34), r.calls,
        r.ms, total > 0 ? 100 * r.ms / total : 0.0, r.floor_ms,
        r.floor_ms > 0 ? r.ms / r.floor_ms : 0.0, r.ms > 0 ? r.flops / r.ms / 1e9 : 0.0,
        r.ms > 0 ? r.bytes / r.ms / 1e6 : 0.0);
  absl::StrAppendFormat(&out, "%-34s %6s %9.3f %6s %9.3f %8.1f\n", "total", "", total, "", floor,
                        floor > 0 ? total / floor : 0.0);
  return out;
}

}  // namespace stepc
