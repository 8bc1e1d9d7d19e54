// The duties around a training job's steps, each an observer of the job:
// the trace, the run's report, the metrics line, the loss plot, the stop on
// a non-finite loss, evaluation, sampling, checkpoints and stop signals.
// The job (trainer.cc) runs the steps and calls its observers, in the order
// it made them, at each point of the run; an observer's error ends the run
// with that status. One observer per file in this folder.

#ifndef STEPC_RUNTIME_TRAIN_OBSERVERS_OBSERVER_H_
#define STEPC_RUNTIME_TRAIN_OBSERVERS_OBSERVER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/train/job_state.h"

namespace stepc {

// One step as measured: its learning rate and time, the targets its loss
// counted (where it counts), its throughput, the seconds its collectives
// took per axes mask and the device memory above the session's start
// (where a GPU tells).
struct StepEvent {
  int64_t step = 0;
  double lr = 0, seconds = 0;
  std::optional<int64_t> counted;
  double rate = 0;  // tokens (a language model) or samples per second
  double gflops = 0, mfu = 0;
  std::map<int, double> comm_seconds;
  std::optional<int64_t> device_bytes;
};

class Observer {
 public:
  virtual ~Observer() = default;
  // Before the first step.
  virtual absl::Status BeforeSteps(JobState&) { return absl::OkStatus(); }
  // After step `e.step` (job.last and job.losses hold it). A CancelledError
  // stops the run after this step: every observer's Stopping runs, then
  // the run ends with that status.
  virtual absl::Status AfterStep(JobState&, const StepEvent&) { return absl::OkStatus(); }
  // The run stops after `step`: what must be on disk before it ends.
  virtual absl::Status Stopping(JobState&, int64_t /*step*/) { return absl::OkStatus(); }
  // After the last step (or with none to run): the run's last words.
  virtual absl::Status Finish(JobState&) { return absl::OkStatus(); }
};

// The observers, each in its own file.
std::unique_ptr<Observer> MakeTraceWriter();
std::unique_ptr<Observer> MakeRunReport();
std::unique_ptr<Observer> MakeStepLog();
std::unique_ptr<Observer> MakePlotWriter();
std::unique_ptr<Observer> MakeNonFiniteStop();
std::unique_ptr<Observer> MakeEvalReport(const JobState& job);
// Said before the first step: a prompt the vocabulary cannot encode, a
// module that cannot sample.
absl::StatusOr<std::unique_ptr<Observer>> MakeSampleReport(const JobState& job);
std::unique_ptr<Observer> MakeCheckpointSaver();
std::unique_ptr<Observer> MakeSignalStop();

// Saves the checkpoint of `step` (every rank), with the trainer's state.
absl::Status SaveJobCheckpoint(JobState& job, int64_t step);

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_OBSERVERS_OBSERVER_H_
