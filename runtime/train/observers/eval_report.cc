// Evaluation on the validation set (collective: every rank evaluates its
// rows of the same batches): before the first step with --eval-every,
// every --eval-every steps and after the last; a metrics line and a
// progress line each time, and the loss for the plot.

#include <cstdio>

#include "absl/strings/str_format.h"
#include "runtime/status_macros.h"
#include "runtime/train/evaluation.h"
#include "runtime/train/observers/observer.h"
#include "runtime/train/step_metrics.h"

namespace stepc {
namespace {

class EvalReport : public Observer {
 public:
  explicit EvalReport(const JobState& job) : evaluator_(job.o, *job.module, *job.data) {}

  absl::Status BeforeSteps(JobState& job) override {
    if (evaluator_.enabled() && job.o.eval_every > 0 && job.first_step <= job.steps)
      return Report(job, job.first_step - 1);
    return absl::OkStatus();
  }
  absl::Status AfterStep(JobState& job, const StepEvent& e) override {
    if (!evaluator_.enabled() ||
        !((job.o.eval_every > 0 && e.step % job.o.eval_every == 0) || e.step == job.steps))
      return absl::OkStatus();
    return job.Traced("eval", e.step, [&] { return Report(job, e.step); });
  }

 private:
  absl::Status Report(JobState& job, int64_t step) {
    STEPC_ASSIGN_OR_RETURN(const Evaluation e,
                           evaluator_.Run(*job.session, *job.comm, *job.data, job.schedule.seed));
    job.val_losses.push_back({step, e.loss});
    const std::string accuracy_json =
        e.has_accuracy ? absl::StrFormat(", \"val_accuracy\": %.6f", e.accuracy) : "";
    STEPC_RETURN_IF_ERROR(job.metrics->Write(
        absl::StrFormat("{\"step\": %d, \"val_loss\": %s%s, \"eval_batches\": %d}\n", step,
                        JsonNumber(e.loss), accuracy_json, e.batches)));
    if (!job.lead) return absl::OkStatus();
    std::printf("eval %5lld/%lld | val_loss %.4f%s | %lld batches, %.2f s\n",
                static_cast<long long>(step), static_cast<long long>(job.steps), e.loss,
                e.has_accuracy ? absl::StrFormat(" | val_accuracy %.4f", e.accuracy).c_str() : "",
                static_cast<long long>(e.batches), e.seconds);
    std::fflush(stdout);
    return absl::OkStatus();
  }

  const Evaluator evaluator_;
};

}  // namespace

std::unique_ptr<Observer> MakeEvalReport(const JobState& job) {
  return std::make_unique<EvalReport>(job);
}

}  // namespace stepc
