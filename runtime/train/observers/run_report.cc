// The end of the run, on rank 0: the step time against its prediction, MFU
// and memory, the collectives' time per axes (and each rank's, for the
// waits of the slower ones), a pipeline's idle time, --summary's JSON and
// the device. Collects what it reports from each step.

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "runtime/formats/atomic_file.h"
#include "runtime/status_macros.h"
#include "runtime/train/observers/observer.h"

namespace stepc {
namespace {

using json = nlohmann::json;

// --summary: the end-of-run figures as one JSON object, written whole.
absl::Status WriteSummary(const std::string& path, const json& summary) {
  AtomicFile file;
  std::string error;
  if (!file.Open(path, error)) return absl::InvalidArgumentError(error);
  file.stream() << summary.dump(1) << "\n";
  if (!file.Commit(error)) return absl::DataLossError(error);
  return absl::OkStatus();
}

// The median of `v` past its first `from` entries (the first step of a run
// warms caches and primitives: left out when there are others).
double MedianFrom(std::vector<double> v, size_t from) {
  v.erase(v.begin(), v.begin() + std::min(from, v.size() - 1));
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Milliseconds with the digits a short (GPU) step needs.
std::string Milliseconds(double seconds) {
  return seconds >= 0.01 ? absl::StrFormat("%.1f ms", 1e3 * seconds)
                         : absl::StrFormat("%.3f ms", 1e3 * seconds);
}

class RunReport : public Observer {
 public:
  absl::Status AfterStep(JobState&, const StepEvent& e) override {
    step_seconds_.push_back(e.seconds);
    step_mfu_.push_back(e.mfu);
    for (const auto& [mask, seconds] : e.comm_seconds) comm_seconds_[mask].push_back(seconds);
    if (e.device_bytes)
      device_peak_bytes_ = std::max(device_peak_bytes_.value_or(0), *e.device_bytes);
    return absl::OkStatus();
  }
  absl::Status Finish(JobState& job) override {
    STEPC_RETURN_IF_ERROR(GatherRankCommunication(job));
    if (job.lead && !step_seconds_.empty()) STEPC_RETURN_IF_ERROR(ReportRun(job));
    if (job.lead && job.module->is_cuda())
      std::printf("stepc-run: device %s\n", job.session->DescribeDevice().c_str());
    std::fflush(stdout);
    return absl::OkStatus();
  }

 private:
  absl::Status GatherRankCommunication(JobState& job);
  absl::Status ReportRun(JobState& job);
  void PrintCommunication(const JobState& job, const std::map<std::string, double>& comm_median,
                          const std::vector<double>& comm_total, size_t from);
  json PipelineIdle(JobState& job, double step_median);
  absl::Status WriteRunSummary(JobState& job, json summary, const json& pipeline, size_t from);

  // Each step's seconds and MFU, the seconds in collectives per axes mask,
  // and each rank's median of those (nanoseconds).
  std::vector<double> step_seconds_, step_mfu_;
  std::map<int, std::vector<double>> comm_seconds_;
  std::vector<uint64_t> rank_comm_ns_;
  // A CUDA step's device memory above the session's start, at its largest
  // after a step (where the device can tell).
  std::optional<int64_t> device_peak_bytes_;
};

// Each rank's median time in collectives per step (nanoseconds), for the
// least over the ranks: the rank that arrives last at a collective waits
// only for the transfer; the others also for it (rank imbalance).
absl::Status RunReport::GatherRankCommunication(JobState& job) {
  if (job.world <= 1 || step_seconds_.empty() || job.module->is_cuda()) return absl::OkStatus();
  std::vector<double> mine(step_seconds_.size(), 0.0);
  for (const auto& [mask, seconds] : comm_seconds_)
    if (seconds.size() == mine.size())
      for (size_t k = 0; k < seconds.size(); ++k) mine[k] += seconds[k];
  if (mine.size() > 1) mine.erase(mine.begin());
  std::sort(mine.begin(), mine.end());
  STEPC_ASSIGN_OR_RETURN(rank_comm_ns_,
                         job.comm->AllGather(static_cast<uint64_t>(1e9 * mine[mine.size() / 2])));
  return absl::OkStatus();
}
// The end of the run on rank 0: the step time against its prediction, MFU
// and memory, the collectives' time per axes, a pipeline's idle time, and
// --summary's JSON.
absl::Status RunReport::ReportRun(JobState& job) {
  const size_t from = step_seconds_.size() > 1 ? 1 : 0;
  const double planned = double(job.session->planned_bytes());
  // The data the process grew by (what the plan and the workspace
  // predict); the libraries' code paged in meanwhile is shown apart.
  const ResidentMemory now = ReadResidentMemory();
  const double measured = double(DataPeakAbove(job.baseline, now) - job.probes_left_bytes);
  const double code = double(std::max<int64_t>(0, now.file_bytes - job.baseline.file_bytes));
  const double predicted_peak = double(job.predicted_peak_bytes);
  const double step_median = MedianFrom(step_seconds_, from);
  // The step's time in collectives per axes, and their sum, per step.
  std::map<std::string, double> comm_median;
  std::vector<double> comm_total(step_seconds_.size(), 0.0);
  for (const auto& [mask, seconds] : comm_seconds_) {
    comm_median[AxesName(mask)] = MedianFrom(seconds, from);
    if (seconds.size() == comm_total.size())
      for (size_t k = 0; k < seconds.size(); ++k) comm_total[k] += seconds[k];
  }
  // A GPU's plan is device memory: compared with the device memory the
  // session added (cudaMemGetInfo), not the host's.
  const std::string memory_text =
      device_peak_bytes_
          ? absl::StrFormat(
                "memory per rank: planned %.1f MB on the device, measured %.1f MB "
                "of device memory above the session's start (%.2fx)",
                planned / 1e6, *device_peak_bytes_ / 1e6,
                planned > 0 ? *device_peak_bytes_ / planned : 0.0)
          : absl::StrFormat(
                "memory per rank: predicted %.1f MB (planned %.1f MB + libraries "
                "%.1f MB), measured %.1f MB of data above the process baseline "
                "(%.2fx; and %.1f MB of library code paged in)",
                predicted_peak / 1e6, planned / 1e6, job.workspace.bytes() / 1e6, measured / 1e6,
                predicted_peak > 0 ? measured / predicted_peak : 0.0, code / 1e6);
  std::printf(
      "stepc-run: %zu steps | step time median %s (steps %lld-%lld)%s%s | %s\n",
      step_seconds_.size(), Milliseconds(step_median).c_str(),
      static_cast<long long>(job.first_step + from), static_cast<long long>(job.steps),
      job.predicted.known
          ? absl::StrFormat(", predicted %s (%.2fx)", Milliseconds(job.predicted.seconds),
                            step_median / job.predicted.seconds)
                .c_str()
          : "",
      job.peak.gflops > 0
          ? absl::StrFormat(" | MFU median %.1f%%", 100 * MedianFrom(step_mfu_, from)).c_str()
          : "",
      memory_text.c_str());
  if (!comm_median.empty() && !job.module->is_cuda())
    PrintCommunication(job, comm_median, comm_total, from);
  const json pipeline = PipelineIdle(job, step_median);
  if (job.o.summary.empty()) return absl::OkStatus();
  json summary = {
      {"steps", step_seconds_.size()},
      {"measured_from_step", job.first_step + static_cast<int64_t>(from)},
      {"step_seconds_median", step_median},
      {"planned_peak_bytes", job.session->planned_bytes()},
      {"library_workspace_bytes", job.workspace.bytes()},
      {"predicted_peak_bytes", job.predicted_peak_bytes},
      {"measured_peak_bytes_above_baseline", now.peak_bytes - job.baseline.peak_bytes},
      {"measured_data_peak_bytes_above_baseline", int64_t(measured)},
      {"measured_device_bytes_above_baseline", device_peak_bytes_.value_or(-1)},
      {"rate_probes_left_bytes", job.probes_left_bytes},
      {"library_code_bytes_paged_in", int64_t(code)},
      {"memory_ratio", device_peak_bytes_   ? (planned > 0 ? *device_peak_bytes_ / planned : 0.0)
                       : predicted_peak > 0 ? measured / predicted_peak
                                            : 0.0},
      {"collective_seconds_median", MedianFrom(comm_total, from)},
      {"collective_seconds_median_by_axes", comm_median},
  };
  return WriteRunSummary(job, summary, pipeline, from);
}

void RunReport::PrintCommunication(const JobState& job,
                                   const std::map<std::string, double>& comm_median,
                                   const std::vector<double>& comm_total, size_t from) {
  std::string by_axes;
  for (const auto& [axes, seconds] : comm_median) {
    double want = -1;
    for (const AxisCommunication& a : job.comm_predicted.axes)
      if (a.axes == axes) want = a.predicted_seconds;
    absl::StrAppend(
        &by_axes, by_axes.empty() ? "" : ", ", axes, " ", absl::StrFormat("%.1f ms", 1e3 * seconds),
        want > 0 ? absl::StrFormat(" (predicted %.1f ms, %.2fx)", 1e3 * want, seconds / want) : "");
  }
  std::printf(
      "stepc-run: time in collectives per step, median: %.1f ms on rank 0 (%s)%s\n",
      1e3 * MedianFrom(comm_total, from), by_axes.c_str(),
      rank_comm_ns_.empty()
          ? ""
          : absl::StrFormat("; least of the ranks %.1f ms, most %.1f ms (the "
                            "difference waits for slower ranks)",
                            1e-6 * *std::min_element(rank_comm_ns_.begin(), rank_comm_ns_.end()),
                            1e-6 * *std::max_element(rank_comm_ns_.begin(), rank_comm_ns_.end()))
                .c_str());
}

// A pipeline's idle time: each rank's waits for transfers and collectives
// over the step, against the schedule's prediction (printed; null without
// a pipeline).
json RunReport::PipelineIdle(JobState& job, double step_median) {
  const stepc_module_info& info = job.module->info();
  json pipeline;
  if (info.pipeline_stages <= 1 || rank_comm_ns_.empty() || step_median <= 0 || !info.report_json)
    return pipeline;
  const json report = json::parse(info.report_json, nullptr, /*allow_exceptions=*/false);
  if (report.is_object() && report.contains("pipeline") && report["pipeline"].is_object())
    pipeline = report["pipeline"];
  std::vector<double> idle;
  for (uint64_t ns : rank_comm_ns_) idle.push_back(std::min(1.0, 1e-9 * ns / step_median));
  pipeline["measured_idle_fraction"] = idle;
  std::string measured_text, predicted_text;
  for (double f : idle) absl::StrAppend(&measured_text, absl::StrFormat(" %.1f%%", 100 * f));
  if (pipeline.contains("predicted_idle_fraction") &&
      pipeline["predicted_idle_fraction"].is_array())
    for (const json& f : pipeline["predicted_idle_fraction"])
      if (f.is_number())
        absl::StrAppend(&predicted_text, absl::StrFormat(" %.1f%%", 100 * f.get<double>()));
  std::printf(
      "stepc-run: pipeline %s over %d micro-batches: idle per rank%s (waiting for "
      "transfers and collectives), predicted%s\n",
      pipeline.value("schedule", std::string("?")).c_str(), pipeline.value("micro_batches", 0),
      measured_text.c_str(), predicted_text.empty() ? " (none)" : predicted_text.c_str());
  return pipeline;
}

// --summary: the figures measured (`summary`), the pipeline's idle time and
// the predictions, one JSON object written whole.
absl::Status RunReport::WriteRunSummary(JobState& job, json summary, const json& pipeline,
                                        size_t from) {
  if (!rank_comm_ns_.empty()) {
    json per_rank = json::array();
    for (uint64_t ns : rank_comm_ns_) per_rank.push_back(1e-9 * double(ns));
    summary["collective_seconds_median_by_rank"] = per_rank;
  }
  if (!pipeline.is_null()) summary["pipeline"] = pipeline;
  if (job.peak.gflops > 0) summary["mfu_median"] = MedianFrom(step_mfu_, from);
  if (job.predicted.known) {
    summary["predicted_step_seconds"] = job.predicted.seconds;
    summary["step_over_predicted"] =
        summary["step_seconds_median"].get<double>() / job.predicted.seconds;
    summary["predicted"] = {{"gemm_seconds", job.predicted.gemm_seconds},
                            {"attention_seconds", job.predicted.attention_seconds},
                            {"memory_bound_seconds", job.predicted.memory_seconds},
                            {"memory_bound_calls", job.predicted.memory_bound_calls},
                            {"kernel_call_seconds", job.predicted.kernel_call_seconds},
                            {"communication_seconds", job.predicted.comm_seconds}};
  }
  json by_axes = json::object();
  for (const AxisCommunication& a : job.comm_predicted.axes)
    by_axes[a.axes] = {{"seconds", a.predicted_seconds},
                       {"collectives", a.collectives},
                       {"wire_bytes", a.wire_bytes},
                       {"link_gbps", a.gbps},
                       {"latency_seconds", a.latency_seconds}};
  summary["predicted_collective_seconds_by_axes"] = by_axes;
  return WriteSummary(job.o.summary, summary);
}

}  // namespace

std::unique_ptr<Observer> MakeRunReport() { return std::make_unique<RunReport>(); }

}  // namespace stepc
