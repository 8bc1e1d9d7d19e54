#include "runtime/train/communication.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "runtime/status_macros.h"

namespace stepc {

int AxesMask(const std::string& key) {
  int mask = 0;
  for (absl::string_view part : absl::StrSplit(key, '+')) {
    if (part.size() != 5 || !absl::StartsWith(part, "axis") || part[4] < '0' ||
        part[4] >= '0' + kMaxMeshAxes)
      return 0;
    mask |= 1 << (part[4] - '0');
  }
  return mask;
}

std::string AxesName(int mask) {
  std::string name;
  for (int a = 0; a < kMaxMeshAxes; ++a)
    if (mask & (1 << a)) absl::StrAppend(&name, name.empty() ? "" : "+", "axis", a);
  return name.empty() ? "none" : name;
}

namespace {

// The median seconds of one blocking all-gather of `floats` per rank
// (after two unmeasured), the same count of calls on every rank.
absl::StatusOr<double> TimeAllGather(Communicator& comm, int mask, int ranks, int64_t floats) {
  std::vector<float> send(floats, 1.0f), recv(floats * ranks);
  std::vector<double> seconds;
  for (int call = 0; call < 12; ++call) {
    const auto start = std::chrono::steady_clock::now();
    STEPC_RETURN_IF_ERROR(comm.AllGather(mask, send.data(), recv.data(), floats));
    if (call >= 2)
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace

absl::StatusOr<CommunicationPrediction> PredictCommunication(Communicator& comm,
                                                             const Module& module) {
  CommunicationPrediction p;
  if (module.is_cuda() || comm.size() < 2 || !module.info().report_json) return p;
  const nlohmann::json report =
      nlohmann::json::parse(module.info().report_json, nullptr, /*allow_exceptions=*/false);
  if (!report.is_object() || !report.contains("collective_wire_bytes_by_axes") ||
      !report.contains("collectives_by_axes") ||
      !report["collective_wire_bytes_by_axes"].is_object())
    return p;
  // Every rank walks the same report in the same (sorted) order, so the
  // probes' collectives match.
  for (const auto& item : report["collective_wire_bytes_by_axes"].items()) {
    AxisCommunication axis;
    axis.axes = item.key();
    axis.mask = AxesMask(axis.axes);
    const nlohmann::json& count = report["collectives_by_axes"].value(axis.axes, nlohmann::json());
    if (axis.mask == 0 || !item.value().is_number() || !count.is_number()) continue;
    axis.wire_bytes = item.value().get<double>();
    axis.collectives = count.get<int64_t>();
    axis.ranks = comm.Ranks(axis.mask);
    if (axis.ranks < 2 || axis.collectives <= 0) continue;
    // A small message for the latency, a large one (4 MiB per rank, or
    // the step's mean if larger, up to 64 MiB) for the bandwidth.
    const double mean = axis.wire_bytes / axis.collectives / (axis.ranks - 1) / 4;
    const int64_t small = 256, large = std::clamp<int64_t>(static_cast<int64_t>(mean), 1 << 20,
                                                            16 << 20);
    STEPC_ASSIGN_OR_RETURN(const double t_small, TimeAllGather(comm, axis.mask, axis.ranks, small));
    STEPC_ASSIGN_OR_RETURN(const double t_large, TimeAllGather(comm, axis.mask, axis.ranks, large));
    const double wire_small = 4.0 * small * (axis.ranks - 1),
                 wire_large = 4.0 * large * (axis.ranks - 1);
    const double per_byte = t_large > t_small ? (t_large - t_small) / (wire_large - wire_small)
                                              : t_large / wire_large;
    axis.gbps = 1e-9 / per_byte;
    axis.latency_seconds = std::max(0.0, t_small - wire_small * per_byte);
    axis.predicted_seconds =
        axis.collectives * axis.latency_seconds + axis.wire_bytes * per_byte;
    p.seconds += axis.predicted_seconds;
    p.axes.push_back(axis);
  }
  p.known = !p.axes.empty();
  return p;
}

}  // namespace stepc
