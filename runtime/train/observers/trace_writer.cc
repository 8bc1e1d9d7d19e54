// --trace: each traced step's collectives and metrics, and the file,
// written when the steps end or a signal stops them.

#include "runtime/train/observers/observer.h"
#include "runtime/train/step_metrics.h"

namespace stepc {
namespace {

class TraceWriter : public Observer {
 public:
  absl::Status AfterStep(JobState& job, const StepEvent& e) override {
    job.trace->Collectives(e.step, job.comm->TakeCollectiveRecords());
    job.trace->Metrics(e.step, SplitMetrics(job.module->info(), job.last.metrics));
    return absl::OkStatus();
  }
  absl::Status Stopping(JobState& job, int64_t) override { return job.trace->Write(); }
  absl::Status Finish(JobState& job) override { return job.trace->Write(); }
};

}  // namespace

std::unique_ptr<Observer> MakeTraceWriter() { return std::make_unique<TraceWriter>(); }

}  // namespace stepc
