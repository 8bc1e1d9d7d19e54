// SIGTERM or SIGINT while the steps run (a preempted or cancelled job,
// interrupt.h): every rank stops after the same step, the step a signal
// reached any rank by; the other observers save what a resume needs.

#include <signal.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/session/checkpoint.h"
#include "runtime/status_macros.h"
#include "runtime/train/interrupt.h"
#include "runtime/train/observers/observer.h"

namespace stepc {
namespace {

class SignalStop : public Observer {
 public:
  absl::Status AfterStep(JobState& job, const StepEvent& e) override {
    int signal = StopSignal();
    if (job.world > 1) {
      STEPC_ASSIGN_OR_RETURN(const std::vector<uint64_t> all,
                             job.comm->AllGather(static_cast<uint64_t>(signal)));
      for (uint64_t s : all) signal = std::max(signal, static_cast<int>(s));
    }
    if (signal == 0 || e.step >= job.steps) return absl::OkStatus();
    return absl::CancelledError(absl::StrFormat(
        "stopped by %s after step %d of %d%s", signal == SIGINT ? "SIGINT" : "SIGTERM", e.step,
        job.steps,
        job.o.checkpoint_dir.empty()
            ? " (no --checkpoint-dir: nothing saved to resume from)"
            : absl::StrCat("; checkpoint ", CheckpointDirForStep(job.o.checkpoint_dir, e.step),
                           ": the same command with --auto-resume (or --resume) continues")));
  }
};

}  // namespace

std::unique_ptr<Observer> MakeSignalStop() { return std::make_unique<SignalStop>(); }

}  // namespace stepc
