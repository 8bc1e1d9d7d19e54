// --plot: written when the run ends or stops, and refreshed while it goes
// (after the first step, so a killed run always leaves one, then at a
// progress line at most every 10 s: each write redraws every step).

#include <chrono>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "runtime/train/loss_plot.h"
#include "runtime/train/observers/observer.h"

namespace stepc {
namespace {

using Clock = std::chrono::steady_clock;

class PlotWriter : public Observer {
 public:
  absl::Status BeforeSteps(JobState&) override {
    last_ = Clock::now();
    return absl::OkStatus();
  }
  absl::Status AfterStep(JobState& job, const StepEvent& e) override {
    if (e.step == job.first_step ||
        (e.step % job.o.log_every == 0 && Clock::now() - last_ > std::chrono::seconds(10)))
      return Write(job);
    return absl::OkStatus();
  }
  absl::Status Stopping(JobState& job, int64_t) override { return Write(job); }
  absl::Status Finish(JobState& job) override { return Write(job); }

 private:
  absl::Status Write(JobState& job) {
    if (!job.lead || job.o.plot.empty() || job.losses.empty()) return absl::OkStatus();
    last_ = Clock::now();
    return WriteLossPlot(
        job.o.plot,
        LossPlot{job.losses, job.first_step, job.val_losses, job.o.plot_log,
                 absl::StrCat(std::filesystem::path(job.path).filename().string(), ": ",
                              job.module->info().sharding, ", batch ", job.data->global_batch(),
                              " x ", job.data->seq(), ", ", job.losses.size(), " steps")});
  }

  Clock::time_point last_ = Clock::now();
};

}  // namespace

std::unique_ptr<Observer> MakePlotWriter() { return std::make_unique<PlotWriter>(); }

}  // namespace stepc
