// What a training job's set-up and preparation made, and what its steps so
// far left: the state the job's phases fill in and its observers read.
// Plain fields: the job (trainer.cc) owns one and hands it to every
// observer (observers/observer.h).

#ifndef STEPC_RUNTIME_TRAIN_JOB_STATE_H_
#define STEPC_RUNTIME_TRAIN_JOB_STATE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "runtime/comm/communicator.h"
#include "runtime/device/device.h"
#include "runtime/session/session.h"
#include "runtime/train/checkpoint_policy.h"
#include "runtime/train/communication.h"
#include "runtime/train/data_source.h"
#include "runtime/train/metrics_log.h"
#include "runtime/train/options.h"
#include "runtime/train/peak.h"
#include "runtime/train/prediction.h"
#include "runtime/train/profile_floor.h"
#include "runtime/train/resident_memory.h"
#include "runtime/train/schedule.h"
#include "runtime/train/trace.h"
#include "runtime/train/workspace.h"

namespace stepc {

struct JobState {
  JobState(std::string path, const TrainOptions& o, std::shared_ptr<Communicator> comm)
      : path(std::move(path)), o(o), comm(std::move(comm)) {}

  // Given.
  const std::string path;
  const TrainOptions& o;
  std::shared_ptr<Communicator> comm;

  // Set up: the module (a pipeline rank's stage; `first` is stage 0's,
  // whose inputs the data feed), the session, the ranks, the schedule,
  // the data, the steps to run and where the run resumes from.
  std::shared_ptr<const Module> first, module;
  std::unique_ptr<Session> session;
  int rank = 0, world = 1;
  bool lead = true;  // rank 0: prints, plots, writes the shared files
  std::string shown_threads;
  ResumePoint resume;
  Schedule schedule;
  std::optional<DataSource> data;
  int64_t first_step = 1, steps = 0;
  bool trains = false;  // a step is left to run
  // The process before the session held anything.
  ResidentMemory baseline;
  std::optional<MetricsLog> metrics;
  TraceSteps trace_steps;

  // Prepared: the libraries' workspace, the peak, the predictions.
  LibraryWorkspace workspace;
  PeakRate peak;
  StepPrediction predicted;
  CommunicationPrediction comm_predicted;
  int64_t probes_left_bytes = 0, predicted_peak_bytes = 0;
  std::optional<Trace> trace;
  // A --profile build's table, written to this file when the step.so is
  // unloaded, and the rates its floors are at (empty: none to print).
  std::string profile_path;
  FloorRates floor_rates;

  // The steps so far: each loss, each evaluation's (step, loss), the last
  // step's result and the last step a checkpoint was saved after (0: none).
  std::vector<float> losses;
  std::vector<std::pair<int64_t, double>> val_losses;
  StepResult last;
  int64_t saved_step = 0;

  // A host phase of `step` in the trace: the time `body` takes.
  template <typename Body>
  absl::Status Traced(const char* name, int64_t step, Body&& body) {
    const double start = MonotonicSeconds();
    absl::Status status = body();
    trace->Host(name, step, start, MonotonicSeconds());
    return status;
  }
};

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_JOB_STATE_H_
