// --checkpoint-dir: a checkpoint every --checkpoint-every steps and after
// the last (checkpoint_policy.h says when), and one when a signal stops the
// run after a step that saved none.

#include "nlohmann/json.hpp"
#include "runtime/status_macros.h"
#include "runtime/train/observers/observer.h"
#include "runtime/train/step_metrics.h"

namespace stepc {
namespace {

class CheckpointSaver : public Observer {
 public:
  absl::Status AfterStep(JobState& job, const StepEvent& e) override {
    if (!ShouldSaveCheckpoint(job.o, e.step, job.steps)) return absl::OkStatus();
    return SaveJobCheckpoint(job, e.step);
  }
  absl::Status Stopping(JobState& job, int64_t step) override {
    if (job.o.checkpoint_dir.empty() || job.saved_step == step) return absl::OkStatus();
    return SaveJobCheckpoint(job, step);
  }
};

}  // namespace

absl::Status SaveJobCheckpoint(JobState& job, int64_t step) {
  const double saving = MonotonicSeconds();
  // What a resumed run needs besides the tensors: its schedule, the data's
  // identity and the last step's figures.
  const nlohmann::json trainer = {
      {"trainer", "stepc-run"},
      {"schedule", ScheduleJson(job.schedule)},
      {"data", job.data->identity()},
      {"last",
       {{"loss", JsonNumber(job.last.loss)}, {"grad_norm", JsonNumber(job.last.grad_norm)}}}};
  STEPC_RETURN_IF_ERROR(SaveTrainingCheckpoint(*job.session, job.o, step, trainer, job.lead));
  job.saved_step = step;
  job.trace->Host("checkpoint", step, saving, MonotonicSeconds());
  return absl::OkStatus();
}

std::unique_ptr<Observer> MakeCheckpointSaver() { return std::make_unique<CheckpointSaver>(); }

}  // namespace stepc
