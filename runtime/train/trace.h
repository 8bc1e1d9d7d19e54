// stepc-run --trace: a Chrome trace-event JSON file (Perfetto and
// chrome://tracing open it) of the steps asked for. One process track per
// rank (rank r > 0 writes PATH.rank<r>; scripts/merge_traces.py joins
// them): the host's phases (data, step, eval, checkpoint) on one thread
// track, and, for a step.so built with `stepc --profile`, every kernel of
// the step on another (kind, op, source location, FLOPs, bytes and the
// achieved GFLOP/s and GB/s as arguments; collectives are kernels too).
// Under several ranks each collective also spans its issue to the end of
// its wait on a collectives track, and each wait is a span of its own.

#ifndef STEPC_RUNTIME_TRAIN_TRACE_H_
#define STEPC_RUNTIME_TRAIN_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/comm/communicator.h"
#include "runtime/session/module.h"
#include "runtime/train/step_metrics.h"

namespace stepc {

// "A:B" (steps A to B), "A" (step A alone) or "all".
struct TraceSteps {
  int64_t first = 2, last = 3;
  bool Contains(int64_t step) const { return step >= first && step <= last; }
};
absl::StatusOr<TraceSteps> ParseTraceSteps(const std::string& text);

// CLOCK_MONOTONIC seconds, the clock a --profile step.so stamps its kernels with.
double MonotonicSeconds();

class Trace {
 public:
  // path empty: a trace that records nothing.
  Trace(std::string path, TraceSteps steps, int rank, const Module& module);
  bool enabled() const { return !path_.empty(); }
  bool Traces(int64_t step) const { return enabled() && steps_.Contains(step); }
  bool has_kernels() const { return module_.trace() != nullptr; }

  // A host phase [start, end) (MonotonicSeconds) of `step` named `name`.
  void Host(const std::string& name, int64_t step, double start, double end);
  // Around session->Step(): kernels recorded between the two calls.
  void BeginStepKernels();
  absl::Status EndStepKernels(int64_t step);
  // The collectives `step` started (Communicator::RecordCollectives): each
  // an async span from issue to the end of its wait on the collectives
  // track (kind, mesh axes, bytes), its wait a span on the waits track.
  void Collectives(int64_t step, const std::vector<Communicator::CollectiveRecord>& records);
  // The step's metrics as counter tracks at its end: a scalar's value, a
  // tensor's max/mean (an expert load's imbalance).
  void Metrics(int64_t step, const std::vector<StepMetric>& metrics);
  // Writes the file (atomically); a disabled trace writes nothing.
  absl::Status Write() const;

 private:
  std::string path_;
  TraceSteps steps_;
  int rank_;
  const Module& module_;
  double origin_;
  nlohmann::json events_ = nlohmann::json::array();
  bool collective_tracks_ = false;
  int64_t next_id_ = 0;  // of the collectives' async spans
  double Microseconds(double seconds) const { return (seconds - origin_) * 1e6; }
};

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_TRACE_H_
