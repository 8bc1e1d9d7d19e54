// How a CUDA step is run: the first step eagerly (cuBLASLt picks its
// algorithms, kernels get their attributes), the second captured as a CUDA
// graph and launched, every later one a replay of that graph — unless what
// the step is bound to changes (then it is captured again), or capture fails
// (then the session runs eagerly from there on, and says why). Plain C++
// over an abstract launcher, so the bookkeeping is tested without a GPU
// (graph_runner_test.cc); cuda_device.cc supplies the CUDA launcher.

#ifndef STEPC_RUNTIME_GRAPH_RUNNER_H_
#define STEPC_RUNTIME_GRAPH_RUNNER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace stepc {

// The operations a graph runner drives; each returns a status.
class StepLauncher {
 public:
  virtual ~StepLauncher() = default;
  // Enqueues one step on the stream (run now, or recorded under capture).
  virtual absl::Status Enqueue() = 0;
  virtual absl::Status BeginCapture() = 0;
  // Ends capture; instantiates the graph if `keep`, else discards it.
  virtual absl::Status EndCapture(bool keep) = 0;
  virtual absl::Status Replay() = 0;
  virtual void DropGraph() = 0;
};

class GraphRunner {
 public:
  enum class Mode { kWarmup, kCapture, kReplay, kEager };
  // `enabled` false: always eager (STEPC_CUDA_GRAPHS=0, or a multi-rank step).
  explicit GraphRunner(bool enabled) : mode_(enabled ? Mode::kWarmup : Mode::kEager) {}

  // Runs one step bound to `binding` (a hash of everything the captured
  // graph bakes in: buffers, collectives table).
  absl::Status Run(StepLauncher& launcher, uint64_t binding);

  Mode mode() const { return mode_; }
  int captures() const { return captures_; }
  int replays() const { return replays_; }
  int eager_runs() const { return eager_runs_; }
  // Why the runner fell back to eager steps ("" if it did not).
  const std::string& fallback_reason() const { return fallback_reason_; }

 private:
  absl::Status RunEager(StepLauncher& launcher);
  absl::Status FallBack(StepLauncher& launcher, const absl::Status& why);

  Mode mode_;
  bool have_graph_ = false;
  uint64_t binding_ = 0;
  int captures_ = 0, replays_ = 0, eager_runs_ = 0;
  std::string fallback_reason_;
};

}  // namespace stepc

#endif  // STEPC_RUNTIME_GRAPH_RUNNER_H_
