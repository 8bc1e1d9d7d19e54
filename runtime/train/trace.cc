#include "runtime/train/trace.h"

#include <cmath>
#include <cstring>
#include <time.h>

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/formats/atomic_file.h"
#include "runtime/train/communication.h"

namespace stepc {
namespace {

using json = nlohmann::json;

// Thread tracks of a rank's process.
constexpr int kHostTrack = 0, kKernelTrack = 1, kBlockTrack = 2, kCollectiveTrack = 3,
              kWaitTrack = 4;

json Metadata(const char* name, int pid, int tid, const std::string& value) {
  return {{"ph", "M"}, {"name", name}, {"pid", pid}, {"tid", tid}, {"args", {{"name", value}}}};
}

}  // namespace

absl::StatusOr<TraceSteps> ParseTraceSteps(const std::string& text) {
  if (text == "all") return TraceSteps{1, INT64_MAX};
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  TraceSteps steps;
  if (parts.size() > 2 || !absl::SimpleAtoi(parts[0], &steps.first) ||
      !absl::SimpleAtoi(parts.back(), &steps.last) || steps.first < 1 ||
      steps.last < steps.first)
    return absl::InvalidArgumentError(absl::StrCat(
        "--trace-steps '", text, "' is not A:B (1 <= A <= B), A or all"));
  return steps;
}

double MonotonicSeconds() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

Trace::Trace(std::string path, TraceSteps steps, int rank, const Module& module)
    : path_(std::move(path)), steps_(steps), rank_(rank), module_(module),
      origin_(MonotonicSeconds()) {
  if (!enabled()) return;
  if (rank_ > 0) path_ = absl::StrCat(path_, ".rank", rank_);
  events_.push_back(Metadata("process_name", rank_, 0, absl::StrCat("rank ", rank_)));
  events_.push_back(Metadata("thread_name", rank_, kHostTrack, "host"));
  if (has_kernels()) {
    events_.push_back(Metadata("thread_name", rank_, kBlockTrack, "blocks"));
    events_.push_back(Metadata("thread_name", rank_, kKernelTrack, "kernels"));
  }
}

void Trace::Collectives(int64_t step,
                        const std::vector<Communicator::CollectiveRecord>& records) {
  if (!Traces(step) || records.empty()) return;
  if (!collective_tracks_) {
    events_.push_back(Metadata("thread_name", rank_, kCollectiveTrack, "collectives (issue to done)"));
    events_.push_back(Metadata("thread_name", rank_, kWaitTrack, "collective waits"));
    collective_tracks_ = true;
  }
  for (const Communicator::CollectiveRecord& r : records) {
    // A collective never waited for (none in a step.so) ends at its issue.
    const double end = r.wait_end > 0 ? r.wait_end : r.issued;
    const std::string name = absl::StrCat(r.kind, " ", AxesName(r.axes));
    const json args = {{"step", step},
                       {"mesh_axes", AxesName(r.axes)},
                       {"floats_per_rank", r.count},
                       {"bytes_per_rank", 4 * r.count}};
    // Async: collectives in flight overlap one another.
    events_.push_back({{"ph", "b"}, {"cat", "collective"}, {"name", name}, {"id", next_id_},
                       {"pid", rank_}, {"tid", kCollectiveTrack}, {"ts", Microseconds(r.issued)},
                       {"args", args}});
    events_.push_back({{"ph", "e"}, {"cat", "collective"}, {"name", name}, {"id", next_id_},
                       {"pid", rank_}, {"tid", kCollectiveTrack}, {"ts", Microseconds(end)}});
    ++next_id_;
    if (r.wait_end > 0)
      events_.push_back({{"ph", "X"}, {"cat", "wait"}, {"name", "wait " + name}, {"pid", rank_},
                         {"tid", kWaitTrack}, {"ts", Microseconds(r.wait_begin)},
                         {"dur", (r.wait_end - r.wait_begin) * 1e6}, {"args", args}});
  }
}

void Trace::Host(const std::string& name, int64_t step, double start, double end) {
  if (!Traces(step)) return;
  events_.push_back({{"ph", "X"}, {"name", name}, {"cat", "host"}, {"pid", rank_},
                     {"tid", kHostTrack}, {"ts", Microseconds(start)},
                     {"dur", (end - start) * 1e6}, {"args", {{"step", step}}}});
}

void Trace::Metrics(int64_t step, const std::vector<StepMetric>& metrics) {
  if (!Traces(step)) return;
  const double now = Microseconds(MonotonicSeconds());
  for (const StepMetric& m : metrics) {
    const double value = m.rank == 0 ? m.values[0] : m.MaxOverMean();
    if (!std::isfinite(value)) continue;
    events_.push_back({{"ph", "C"}, {"name", m.name}, {"pid", rank_}, {"ts", now},
                       {"args", {{m.rank == 0 ? "value" : "max/mean", value}}}});
  }
}

void Trace::BeginStepKernels() {
  if (!has_kernels()) return;
  const stepc_trace_event* events;
  const stepc_trace_site* sites;
  size_t count, site_count;
  module_.trace()(1, &events, &count, &sites, &site_count);
}

absl::Status Trace::EndStepKernels(int64_t step) {
  if (!has_kernels()) return absl::OkStatus();
  const stepc_trace_event* events;
  const stepc_trace_site* sites;
  size_t count, site_count;
  // The step.so's code: 1 out of memory, 2 its CUDA events unreadable.
  const int lost = module_.trace()(0, &events, &count, &sites, &site_count);
  if (lost == 1)
    return absl::ResourceExhaustedError("--trace: the step.so ran out of memory recording kernels");
  if (lost != 0)
    return absl::InternalError(
        "--trace: the step.so could not read its kernels' CUDA events (none recorded?)");
  // A block's span: its consecutive kernels (the backward revisits the
  // blocks in reverse, each a span of its own).
  std::string block;
  double block_start = 0, block_end = 0;
  auto close_block = [&] {
    if (block.empty()) return;
    events_.push_back({{"ph", "X"}, {"name", block}, {"cat", "block"}, {"pid", rank_},
                       {"tid", kBlockTrack}, {"ts", Microseconds(block_start)},
                       {"dur", (block_end - block_start) * 1e6}, {"args", {{"step", step}}}});
  };
  for (size_t i = 0; i < count; ++i) {
    const stepc_trace_event& e = events[i];
    const bool known = e.site >= 0 && static_cast<size_t>(e.site) < site_count;
    const std::string now = known ? sites[e.site].block : "";
    // A collective's issue or wait (no block of its own) leaves the run
    // around it whole.
    const bool collective = known && std::strncmp(sites[e.site].kind, "mesh.", 5) == 0;
    if (now != block && !collective) {
      close_block();
      block = now;
      block_start = e.start_s;
    }
    if (!collective || !block.empty()) block_end = e.end_s;
    const double seconds = e.end_s - e.start_s;
    json event = {{"ph", "X"}, {"cat", "kernel"}, {"pid", rank_}, {"tid", kKernelTrack},
                  {"ts", Microseconds(e.start_s)}, {"dur", seconds * 1e6}};
    json args = {{"step", step}, {"site", e.site}};
    if (e.site >= 0 && static_cast<size_t>(e.site) < site_count) {
      const stepc_trace_site& s = sites[e.site];
      event["name"] = s.kind;
      args["op"] = s.op;
      if (*s.location) args["location"] = s.location;
      args["flops"] = s.flops;
      args["bytes"] = s.bytes;
      args["live_bytes"] = s.live_bytes;
      if (*s.block) args["block"] = s.block;
      // The plan's live arena bytes, a counter track beside the kernels.
      events_.push_back({{"ph", "C"}, {"name", "live arena bytes (plan)"}, {"pid", rank_},
                         {"ts", Microseconds(e.start_s)}, {"args", {{"bytes", s.live_bytes}}}});
      if (seconds > 0) {
        if (s.flops) args["gflops_per_s"] = s.flops / seconds / 1e9;
        args["gb_per_s"] = s.bytes / seconds / 1e9;
      }
    } else {
      event["name"] = "kernel";  // more marks ran than the compiler numbered
    }
    event["args"] = std::move(args);
    events_.push_back(std::move(event));
  }
  close_block();
  return absl::OkStatus();
}

absl::Status Trace::Write() const {
  if (!enabled()) return absl::OkStatus();
  const json trace = {{"traceEvents", events_},
                      {"displayTimeUnit", "ms"},
                      {"otherData", {{"module", module_.path()},
                                     {"kernels", has_kernels() ? "recorded (stepc --profile)"
                                                               : "not recorded: build the "
                                                                 "step.so with stepc --profile"},
                                     {"steps", absl::StrCat(steps_.first, ":", steps_.last)}}}};
  AtomicFile file;
  std::string error;
  if (!file.Open(path_, error)) return absl::PermissionDeniedError(error);
  file.stream() << trace.dump() << "\n";
  return file.Commit(error) ? absl::OkStatus() : absl::DataLossError(error);
}

}  // namespace stepc
