// The step's metrics: its line in --metrics (JSON, streamed) and its
// progress line on stdout (rank 0, every --log-every steps, the first and
// the last, and any step whose loss is not finite); and the stop on a
// non-finite loss, once the line that shows it is written.

#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/status_macros.h"
#include "runtime/train/observers/observer.h"
#include "runtime/train/step_metrics.h"

namespace stepc {
namespace {

class StepLog : public Observer {
 public:
  absl::Status AfterStep(JobState& job, const StepEvent& e) override {
    const StepResult& last = job.last;
    const bool lm = job.data->language_model();
    const bool finite = std::isfinite(last.loss) && std::isfinite(last.grad_norm);
    const std::vector<StepMetric> metrics = SplitMetrics(job.module->info(), last.metrics);
    const bool mfu = job.peak.gflops > 0;
    STEPC_RETURN_IF_ERROR(job.metrics->Write(absl::StrFormat(
        "{\"step\": %d, \"loss\": %s, \"lr\": %.6g, \"grad_norm\": %s, \"%s\": %.1f, "
        "\"gflops_per_s\": %.3f, \"planned_peak_bytes\": %d, \"measured_peak_bytes\": %d, "
        "\"baseline_bytes\": %d%s%s%s%s}\n",
        e.step, JsonNumber(last.loss), e.lr, JsonNumber(last.grad_norm),
        lm ? "tokens_per_s" : "samples_per_s", e.rate, e.gflops, job.session->planned_bytes(),
        ReadResidentMemory().peak_bytes, job.baseline.peak_bytes,
        e.counted ? absl::StrFormat(", \"counted_targets\": %d", *e.counted) : "",
        mfu ? absl::StrFormat(", \"mfu\": %.6f, \"peak_gflops_per_s\": %.3f", e.mfu,
                              job.peak.gflops)
            : "",
        MetricsJsonMember(metrics), finite ? "" : ", \"nonfinite\": true")));
    if (job.lead && (e.step % job.o.log_every == 0 || e.step == job.first_step ||
                     e.step == job.steps || !finite))
      std::printf(
          "step %5lld/%lld | loss %.4f%s | lr %.2e | norm %.3f%s | %.0f %s | %.2f GFLOP/s%s\n",
          static_cast<long long>(e.step), static_cast<long long>(job.steps), last.loss,
          e.counted ? absl::StrFormat(" over %d targets", *e.counted).c_str() : "", e.lr,
          last.grad_norm, MetricsText(metrics).c_str(), e.rate, lm ? "tok/s" : "samples/s",
          e.gflops, mfu ? absl::StrFormat(" | MFU %.1f%%", 100 * e.mfu).c_str() : "");
    std::fflush(stdout);  // a killed run still shows how far it got
    return absl::OkStatus();
  }
};

// After the metrics line and the plot: they show how it diverged.
class NonFiniteStop : public Observer {
 public:
  absl::Status AfterStep(JobState& job, const StepEvent& e) override {
    if (std::isfinite(job.last.loss)) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("the loss is ", job.last.loss, " at step ", e.step));
  }
};

}  // namespace

std::unique_ptr<Observer> MakeStepLog() { return std::make_unique<StepLog>(); }
std::unique_ptr<Observer> MakeNonFiniteStop() { return std::make_unique<NonFiniteStop>(); }

}  // namespace stepc
