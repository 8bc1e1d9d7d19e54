#include "runtime/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "runtime/device/cpu_threads.h"
#include "runtime/session/session.h"
#include "runtime/status_macros.h"
#include "runtime/train/agreement.h"
#include "runtime/train/checkpoint_policy.h"
#include "runtime/train/data_source.h"
#include "runtime/train/evaluation.h"
#include "runtime/train/interrupt.h"
#include "runtime/train/loss_plot.h"
#include "runtime/train/metrics_log.h"
#include "runtime/train/step_metrics.h"
#include "runtime/train/outputs.h"
#include "runtime/train/peak.h"
#include "runtime/formats/atomic_file.h"
#include "runtime/train/communication.h"
#include "runtime/train/prediction.h"
#include "runtime/train/resident_memory.h"
#include "runtime/train/workspace.h"
#include "runtime/train/sampler.h"
#include "runtime/train/schedule.h"
#include "runtime/train/trace.h"

namespace stepc {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A JSON number, or null for what JSON cannot hold (NaN, infinities).
std::string Json(double v) { return std::isfinite(v) ? absl::StrFormat("%.6f", v) : "null"; }

// M of stepc --micro-batches=M, from the compile options the report
// carries (1 where the report predates the flag).
int64_t MicroBatches(const stepc_module_info& info) {
  if (!info.report_json) return 1;
  const nlohmann::json report = nlohmann::json::parse(info.report_json, nullptr, false);
  if (!report.is_object() || !report.contains("compile_options") ||
      !report["compile_options"].is_string())
    return 1;
  const std::string options = report["compile_options"].get<std::string>();
  const std::string key = " micro-batches=";
  const size_t at = options.find(key);
  if (at == std::string::npos) return 1;
  return std::max<int64_t>(std::atoll(options.c_str() + at + key.size()), 1);
}

// "batch B x T" of a language model's global batch, else every input's
// global shape; "in M micro-batches" where the step splits it.
std::string BatchText(const stepc_module_info& info, int world) {
  const int64_t m = MicroBatches(info);
  const std::string micro = m > 1 ? absl::StrCat(" in ", m, " micro-batches") : "";
  std::vector<std::string> parts;
  for (int i = 0; i < info.num_args; ++i) {
    const stepc_arg_info& a = info.args[i];
    if (a.kind != STEPC_ARG_INPUT) continue;
    std::vector<int64_t> shape(a.shape, a.shape + a.rank);
    if (!shape.empty()) shape[0] *= world;
    if (std::string(a.name) == "tokens" && a.rank == 2)
      return absl::StrCat("batch ", shape[0], " x ", shape[1], micro);
    parts.push_back(absl::StrCat(a.name, " [", absl::StrJoin(shape, ", "), "]"));
  }
  return absl::StrCat("inputs ", absl::StrJoin(parts, ", "), micro);
}

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

// The training job as an object: set up (module, session, weights, data),
// prepare (probes and predictions), train (the steps, each followed by its
// duties: metrics, evaluation, sampling, checkpoints, signals), finish (the
// run's report and the files asked for). Each phase is a method, each duty
// one too; RunTrainingJob runs them in order.
class TrainingJob {
 public:
  TrainingJob(std::string path, const TrainOptions& o, std::shared_ptr<Communicator> comm)
      : path_(std::move(path)), o_(o), comm_(std::move(comm)) {}

  absl::Status SetUp();
  absl::Status Prepare();
  absl::Status Train();
  absl::Status Finish();

 private:
  // Set up.
  absl::Status LoadModule();
  absl::Status LoadWeights();
  absl::Status OpenData();
  absl::Status CheckRequests();
  void PrintHeader();
  // Prepare.
  absl::Status PredictTime();
  absl::Status PredictLinks();
  void PrintPredictions();
  // Train: one step, then its duties.
  absl::Status RunStep(int64_t step);
  absl::Status LogStep(int64_t step, double lr, double seconds, std::optional<int64_t> counted);
  absl::Status AfterStep(int64_t step);
  absl::Status StopOnSignal(int64_t step, bool saved);
  absl::Status ReportSample(int64_t step, bool final);
  absl::Status ReportEval(int64_t step);
  absl::Status WritePlot();
  absl::Status SaveCheckpoint(int64_t step);
  // Finish.
  absl::Status GatherRankCommunication();
  absl::Status ReportRun();
  void PrintCommunication(const std::map<std::string, double>& comm_median,
                          const std::vector<double>& comm_total, size_t from);
  json PipelineIdle(double step_median);
  absl::Status WriteRunSummary(json summary, const json& pipeline, size_t from);
  // A host phase of `step` in the trace: the time `body` takes.
  template <typename Body>
  absl::Status Traced(const char* name, int64_t step, Body&& body) {
    const double start = MonotonicSeconds();
    absl::Status status = body();
    trace_->Host(name, step, start, MonotonicSeconds());
    return status;
  }

  const std::string path_;
  const TrainOptions& o_;
  std::shared_ptr<Communicator> comm_;
  std::string shown_threads_;
  std::shared_ptr<const Module> first_, module_;
  std::unique_ptr<Session> session_;
  ResidentMemory baseline_;
  int64_t baseline_bytes_ = 0;
  int rank_ = 0, world_ = 1;
  bool lead_ = true;
  ResumePoint resume_;
  Schedule schedule_;
  bool no_data_ = false;
  std::optional<DataSource> data_;
  std::optional<Evaluator> evaluator_;
  int64_t first_step_ = 1, steps_ = 0;
  TraceSteps trace_steps_;
  Vocabulary sample_vocabulary_;
  std::vector<int32_t> prompt_ids_;
  // A token vocabulary's sample with no --prompt starts from end of text,
  // as llm.c's do.
  bool from_end_of_text_ = false;
  std::optional<MetricsLog> metrics_;
  bool trains_ = false;
  LibraryWorkspace workspace_;
  PeakRate peak_;
  StepPrediction predicted_;
  CommunicationPrediction comm_predicted_;
  int64_t probes_left_bytes_ = 0, predicted_peak_bytes_ = 0;
  std::optional<Trace> trace_;
  std::vector<float> losses_;
  std::vector<std::pair<int64_t, double>> val_losses_;
  Clock::time_point last_plot_ = Clock::now();
  StepResult last_;
  // For the end-of-run report: each step's seconds and MFU, and the
  // seconds in collectives per axes mask.
  std::vector<double> step_seconds_, step_mfu_;
  // A CUDA step's device memory above the session's start, at its largest
  // after a step (where the device can tell).
  std::optional<int64_t> device_peak_bytes_;
  std::map<int, std::vector<double>> comm_seconds_;
  std::vector<uint64_t> rank_comm_ns_;
};

absl::Status TrainingJob::SetUp() {
  STEPC_RETURN_IF_ERROR(LoadModule());
  STEPC_RETURN_IF_ERROR(LoadWeights());
  STEPC_RETURN_IF_ERROR(OpenData());
  STEPC_RETURN_IF_ERROR(CheckRequests());
  // Streamed: a line per step, flushed, appended to on resume (rank 0).
  metrics_.emplace(lead_ ? o_.metrics : "", first_step_);
  PrintHeader();
  // MFU: the model's FLOPs over every rank's peak (each rank's own, probed
  // on its threads; the ranks of a job are alike). Nothing to train: no probe.
  trains_ = first_step_ <= steps_;
  // --save-outputs evaluates the last batch a step trained on.
  if (!trains_ && !o_.save_outputs.empty())
    return absl::FailedPreconditionError(
        "--save-outputs evaluates the last batch trained, and this run trains no step "
        "(--steps 0, or a checkpoint with none left)");
  return absl::OkStatus();
}

absl::Status TrainingJob::LoadModule() {
  STEPC_RETURN_IF_ERROR(ValidateOptions(o_));
  // Before step.so brings the OpenMP runtime: --threads, else an explicit
  // OMP_NUM_THREADS, else the cores divided among this node's ranks.
  const int threads = o_.threads > 0                   ? o_.threads
                      : std::getenv("OMP_NUM_THREADS") ? 0
                                                       : DefaultCpuThreads();
  if (threads > 0) UseCpuThreads(threads);
  shown_threads_ =
      threads > 0 ? std::to_string(threads) : std::string(std::getenv("OMP_NUM_THREADS"));
  STEPC_ASSIGN_OR_RETURN(std::unique_ptr<Module> loaded, Module::Load(path_));
  // A pipeline rank plans, predicts and runs its own stage's step; the
  // data are the first stage's (which reads the tokens).
  first_ = std::move(loaded);
  STEPC_ASSIGN_OR_RETURN(module_, Module::ForRank(first_, comm_->rank(), comm_->size()));
  // The process before the session holds anything: what its peak is
  // compared with the plan above.
  ResetResidentPeak();
  baseline_ = ReadResidentMemory();
  baseline_bytes_ = baseline_.peak_bytes;
  STEPC_ASSIGN_OR_RETURN(session_, Session::Create(module_, comm_));
  rank_ = comm_->rank();
  world_ = comm_->size();
  lead_ = rank_ == 0;
  return absl::OkStatus();
}

absl::Status TrainingJob::LoadWeights() {
  // A resumed run takes its schedule (and seed, hence its batches) from the
  // checkpoint; its tensors are loaded once the data is known to match.
  STEPC_ASSIGN_OR_RETURN(resume_, FindResumePoint(o_));
  schedule_ = OptionSchedule(o_);
  if (!resume_.dir.empty()) {
    STEPC_ASSIGN_OR_RETURN(schedule_, ResumedSchedule(o_, resume_.trainer, resume_.dir, lead_));
  }
  STEPC_RETURN_IF_ERROR(session_->InitParams(schedule_.seed));
  std::vector<std::string> not_loaded;
  std::vector<std::string>* missing = o_.init_missing ? &not_loaded : nullptr;
  if (!o_.init_npy.empty()) STEPC_RETURN_IF_ERROR(LoadParams(*session_, o_.init_npy, missing));
  std::vector<std::string> unused;
  if (!o_.init_safetensors.empty())
    STEPC_RETURN_IF_ERROR(LoadSafetensors(*session_, o_.init_safetensors, missing, &unused));
  if (lead_ && !unused.empty())
    std::fprintf(stderr,
                 "stepc-run: warning: --init-safetensors '%s' holds %zu tensor(s) that are no "
                 "parameter of this model, not loaded: %s\n",
                 o_.init_safetensors.c_str(), unused.size(), absl::StrJoin(unused, ", ").c_str());
  if (lead_ && !not_loaded.empty())
    std::printf("stepc-run: --init-missing: %zu parameter(s) not in %s keep their "
                "initialisers' values: %s\n",
                not_loaded.size(),
                o_.init_npy.empty() ? o_.init_safetensors.c_str() : o_.init_npy.c_str(),
                absl::StrJoin(not_loaded, ", ").c_str());
  return absl::OkStatus();
}

absl::Status TrainingJob::OpenData() {
  // Resumed with no step left to train, no data named and nothing to
  // evaluate (e.g. only --sample): no training data is read; the
  // checkpoint's vocabulary decodes samples.
  no_data_ = !resume_.dir.empty() && IsLanguageModel(*module_) &&
             schedule_.steps <= resume_.info.step && !o_.Given("data") && !o_.Given("corpus") &&
             !o_.Given("batch_npy") && o_.val_fraction == 0 && o_.val_data.empty() &&
             o_.val_batch_npy.empty();
  STEPC_ASSIGN_OR_RETURN(DataSource data, DataSource::Open(o_, *first_, rank_, world_, no_data_));
  data_.emplace(std::move(data));
  if (world_ > 1)
    STEPC_RETURN_IF_ERROR(AgreeOnRun(*comm_, o_, schedule_, data_->tokens(), resume_.dir));
  STEPC_RETURN_IF_ERROR(data_->OpenValidation(o_, *first_));
  evaluator_.emplace(o_, *module_, *data_);
  if (!resume_.dir.empty()) {
    if (!no_data_) STEPC_RETURN_IF_ERROR(data_->CheckResumed(resume_.trainer, resume_.dir));
    STEPC_RETURN_IF_ERROR(ResumeSession(*session_, resume_, lead_));
    first_step_ = session_->steps_done() + 1;
  }
  steps_ = schedule_.steps;
  return absl::OkStatus();
}

// Said before the first step, not after the last: a trace that would
// record nothing, a prompt the vocabulary cannot encode.
absl::Status TrainingJob::CheckRequests() {
  STEPC_ASSIGN_OR_RETURN(trace_steps_, ParseTraceSteps(o_.trace_steps));
  if (!o_.trace.empty() && (trace_steps_.first > steps_ || trace_steps_.last < first_step_))
    return absl::InvalidArgumentError(absl::StrFormat(
        "--trace-steps %s records no step of this run (steps %d to %d)%s", o_.trace_steps,
        first_step_, steps_, o_.Given("trace_steps") ? "" : ": give --trace-steps"));
  if (lead_ && !o_.save_outputs.empty() && module_->info().logits_rank == 0)
    std::fprintf(stderr,
                 "stepc-run: note: %s returns no logits (its loss is not one f32 "
                 "cross-entropy whose logits the eval step can return): --save-outputs writes "
                 "the loss and the loss function's outputs only\n",
                 path_.c_str());
  if (o_.sample > 0) {
    STEPC_RETURN_IF_ERROR(CheckCanSample(*module_));
    STEPC_ASSIGN_OR_RETURN(sample_vocabulary_,
                           SampleVocabulary(data_->vocabulary(), resume_.trainer));
    from_end_of_text_ = !o_.Given("prompt") && sample_vocabulary_.end_of_text() >= 0;
    if (from_end_of_text_) {
      prompt_ids_ = {sample_vocabulary_.end_of_text()};
    } else {
      STEPC_ASSIGN_OR_RETURN(prompt_ids_, sample_vocabulary_.Encode(o_.prompt));
    }
  }
  return absl::OkStatus();
}

void TrainingJob::PrintHeader() {
  if (!lead_) return;
  const stepc_module_info& info = module_->info();
  // (Only a --warmup asked for: the default outlasting a short test run is
  // not news.)
  if (steps_ > 0 && schedule_.warmup > steps_ && o_.Given("warmup"))
    std::fprintf(stderr,
                 "stepc-run: warning: --warmup %lld is longer than --steps %lld: the learning rate "
                 "only reaches %.3g of --lr\n",
                 static_cast<long long>(schedule_.warmup), static_cast<long long>(steps_),
                 double(steps_) / double(schedule_.warmup));
  std::printf("stepc-run: %s | planned %.1f MB | %s | %s | %lld steps%s%s\n", path_.c_str(),
              session_->planned_bytes() / 1e6, BatchText(info, data_->data_world()).c_str(),
              data_->Describe().c_str(), static_cast<long long>(steps_),
              world_ > 1 ? absl::StrCat(" | ", world_, " ranks (", info.sharding, ")").c_str() : "",
              module_->is_cuda() ? "" : absl::StrCat(" | ", shown_threads_, " threads").c_str());
  // Frozen parameters: those without optimizer state (every optimizer keeps
  // an exp_avg for each parameter it trains).
  std::set<std::string> trained;
  int params = 0;
  for (int i = 0; i < info.num_args; ++i) {
    params += info.args[i].kind == STEPC_ARG_PARAM;
    absl::string_view name = info.args[i].name;
    if (info.args[i].kind == STEPC_ARG_EXP_AVG && absl::ConsumePrefix(&name, "exp_avg."))
      trained.insert(std::string(name));
  }
  const int frozen = params - static_cast<int>(trained.size());
  if (frozen > 0)
    std::printf("stepc-run: %d of %d parameters frozen (held and read, not trained)\n", frozen,
                params);
}

absl::Status TrainingJob::Prepare() {
  // The libraries' own memory beside the plan (BLAS buffers, MPI's
  // temporaries), probed on every rank before any other probe has used
  // them.
  if (trains_ && !module_->is_cuda()) {
    STEPC_ASSIGN_OR_RETURN(workspace_, ProbeLibraryWorkspace(*module_, *comm_));
  }
  const ResidentMemory before_rate_probes = ReadResidentMemory();
  STEPC_RETURN_IF_ERROR(PredictTime());
  STEPC_RETURN_IF_ERROR(PredictLinks());
  // The rate probes' buffers are freed: forgotten in the peak. What they
  // left resident (a 1024³ GEMM's packing beyond the step's shapes, heap
  // kept) is no part of the step's memory.
  ResetResidentPeak();
  probes_left_bytes_ =
      std::max<int64_t>(0, ReadResidentMemory().data_bytes - before_rate_probes.data_bytes);
  predicted_peak_bytes_ = session_->planned_bytes() + workspace_.bytes();
  PrintPredictions();
  if (lead_ && steps_ == 0)
    std::printf("stepc-run: --steps 0: no training step\n");
  else if (lead_ && first_step_ > steps_)
    std::printf("stepc-run: the checkpoint is at step %lld of %lld: nothing left to train\n",
                static_cast<long long>(first_step_ - 1), static_cast<long long>(steps_));
  // --trace: the steps asked for, on every rank (each its own file).
  trace_.emplace(o_.trace, trace_steps_, rank_, *module_);
  if (lead_ && trace_->enabled() && !trace_->has_kernels())
    std::fprintf(stderr,
                 "stepc-run: --trace: %s has no kernel timers (build it with stepc --profile): "
                 "tracing the host's phases only\n",
                 path_.c_str());
  return absl::OkStatus();
}

// The step time predicted before step 1, compared with the measured at the
// end; the peak that MFU divides by.
absl::Status TrainingJob::PredictTime() {
  const stepc_module_info& info = module_->info();
  peak_ = trains_ ? FindPeak(*module_, o_.peak_tflops, shown_threads_,
                             module_->is_cuda() ? session_->DescribeDevice() : "")
                  : PeakRate{};
  // On several ranks each rate is the slowest rank's (exchanged).
  absl::Status exchanged = absl::OkStatus();
  const SlowestOfRanks slowest_of_ranks = [&](double mine) {
    uint64_t bits;
    std::memcpy(&bits, &mine, sizeof bits);
    absl::StatusOr<std::vector<uint64_t>> all = comm_->AllGather(bits);
    if (!all.ok()) {
      exchanged.Update(all.status());
      return mine;
    }
    double slowest = mine;
    for (uint64_t b : *all) {
      double v;
      std::memcpy(&v, &b, sizeof v);
      slowest = std::min(slowest, v);
    }
    return slowest;
  };
  predicted_ = !trains_             ? StepPrediction{}
               : module_->is_cuda() ? PredictCudaStep(*module_, peak_, session_->DescribeDevice())
                                    : stepc::PredictStep(*module_, peak_,
                                                  std::max(1, std::atoi(shown_threads_.c_str())),
                                                  // A pipeline's stages differ in shapes: each
                                                  // its own.
                                                  world_ > 1 && info.pipeline_stages <= 1
                                                      ? slowest_of_ranks
                                                      : nullptr);
  STEPC_RETURN_IF_ERROR(exchanged);
  // The same GEMM kernel reached more on one of the step's shapes than on
  // the 1024³ probe (a noisy probe): the peak is at least that, so MFU
  // never exceeds 100% of what the kernel was seen to do.
  if (o_.peak_tflops <= 0 && predicted_.best_gemm_gflops > peak_.gflops && peak_.gflops > 0) {
    peak_.gflops = predicted_.best_gemm_gflops;
    peak_.source += ", raised to the fastest of the step's GEMM shapes";
  }
  if (lead_ && trains_)
    std::printf(peak_.gflops > 0 ? "stepc-run: peak %.1f GFLOP/s per rank (%s)\n"
                                 : "stepc-run: no MFU (%.0f: %s)\n",
                peak_.gflops, peak_.source.c_str());
  return absl::OkStatus();
}

// Communication, unless stepc --link-gbps predicted it: the job's own
// link, probed on every rank (collective) before step 1.
absl::Status TrainingJob::PredictLinks() {
  if (!trains_ || world_ <= 1 || module_->is_cuda()) return absl::OkStatus();
  // (A pipeline's ranks probe alike on stage 0's figures.)
  STEPC_ASSIGN_OR_RETURN(comm_predicted_, stepc::PredictCommunication(*comm_, *first_));
  if (predicted_.known && comm_predicted_.known && predicted_.comm_seconds == 0) {
    predicted_.comm_seconds = comm_predicted_.seconds;
    predicted_.seconds += comm_predicted_.seconds;
  }
  return absl::OkStatus();
}

void TrainingJob::PrintPredictions() {
  if (!lead_) return;
  if (workspace_.known)
    std::printf("stepc-run: predicted memory %.1f MB per rank (the plan's %.1f MB + the "
                "libraries' workspace %.1f MB: GEMM %.1f MB on %d shapes, collectives %.1f MB "
                "on %d kinds%s, probed)\n",
                predicted_peak_bytes_ / 1e6, session_->planned_bytes() / 1e6,
                workspace_.bytes() / 1e6, workspace_.gemm_bytes / 1e6, workspace_.gemm_shapes,
                workspace_.collective_bytes / 1e6, workspace_.collective_kinds,
                workspace_.collectives_in_flight > 0
                    ? absl::StrFormat(" and %d in flight together",
                                      workspace_.collectives_in_flight)
                          .c_str()
                    : "");
  const StepPrediction& p = predicted_;
  if (p.known && p.datasheet)
    std::printf("stepc-run: predicted step %.3f ms per rank (every product %.3f ms at the "
                "peak, memory-bound kernels %.3f ms at %.0f GB/s (%s)%s; a roofline: launches "
                "and kernels below the peak not counted)\n",
                1e3 * p.seconds, 1e3 * p.gemm_seconds, 1e3 * p.memory_seconds, p.memory_gbps,
                p.memory_source.c_str(),
                p.comm_seconds > 0
                    ? absl::StrFormat(", exposed communication %.3f ms", 1e3 * p.comm_seconds)
                          .c_str()
                    : "");
  else if (p.known)
    std::printf("stepc-run: predicted step %.1f ms per rank (GEMMs and attention %.1f ms at "
                "the rates of their %d + %d shapes, memory-bound kernels %.1f ms at %.1f GB/s "
                "(%s)%s%s)\n",
                1e3 * p.seconds, 1e3 * p.gemm_seconds, p.gemm_shapes, p.attention_shapes,
                1e3 * p.memory_seconds, p.memory_gbps, p.memory_source.c_str(),
                p.kernel_call_seconds > 0
                    ? absl::StrFormat(" + %.1f us for each of their %d calls",
                                      1e6 * p.kernel_call_seconds, p.memory_bound_calls)
                          .c_str()
                    : "",
                p.comm_seconds > 0
                    ? absl::StrFormat(", exposed communication %.1f ms", 1e3 * p.comm_seconds)
                          .c_str()
                    : "");
  if (comm_predicted_.known)
    for (const AxisCommunication& a : comm_predicted_.axes)
      std::printf("stepc-run: predicted communication on %s: %.1f ms per step (%lld "
                  "collectives, %.2f MB on the wire per rank; link probed on %d ranks: %.2f "
                  "GB/s after %.1f us)\n",
                  a.axes.c_str(), 1e3 * a.predicted_seconds,
                  static_cast<long long>(a.collectives), a.wire_bytes / 1e6, a.ranks, a.gbps,
                  1e6 * a.latency_seconds);
}

absl::Status TrainingJob::Train() {
  last_plot_ = Clock::now();
  if (evaluator_->enabled() && o_.eval_every > 0 && first_step_ <= steps_)
    STEPC_RETURN_IF_ERROR(ReportEval(first_step_ - 1));
  // Caught while the steps run only: a signal during the final sample or
  // the writes after it ends the process as it always has.
  std::optional<InterruptGuard> interrupts;
  interrupts.emplace();
  for (int64_t step = first_step_; step <= steps_; ++step) {
    STEPC_RETURN_IF_ERROR(RunStep(step));
    STEPC_RETURN_IF_ERROR(AfterStep(step));
  }
  interrupts.reset();
  return trace_->Write();
}

absl::Status TrainingJob::RunStep(int64_t step) {
  STEPC_RETURN_IF_ERROR(
      Traced("data", step, [&] { return data_->SetStep(*session_, schedule_.seed, step); }));
  // A loss that leaves targets out (SFT's prompts) averages over the
  // counted ones: the whole batch's count is logged beside the loss (tp
  // ranks hold the same rows: each data rank is counted once).
  std::optional<int64_t> counted = session_->CountedTargets();
  if (counted && world_ > 1) {
    STEPC_ASSIGN_OR_RETURN(const std::vector<uint64_t> all,
                           comm_->AllGather(static_cast<uint64_t>(*counted)));
    uint64_t sum = 0;
    for (uint64_t c : all) sum += c;
    counted = static_cast<int64_t>(sum / (world_ / data_->data_world()));
  }
  const double lr = LearningRate(schedule_, step);
  const auto start = Clock::now();
  comm_->ResetTimes();
  comm_->RecordCollectives(trace_->Traces(step) && world_ > 1);
  STEPC_RETURN_IF_ERROR(Traced("step", step, [&]() -> absl::Status {
    // (Inside the step's span: a CUDA step's kernels are placed from here.)
    if (trace_->Traces(step)) trace_->BeginStepKernels();
    STEPC_ASSIGN_OR_RETURN(last_, session_->Step(static_cast<float>(lr)));
    return absl::OkStatus();
  }));
  const double seconds = Since(start);
  if (const std::optional<int64_t> device = session_->DeviceMemoryAboveBaseline())
    device_peak_bytes_ = std::max(device_peak_bytes_.value_or(0), *device);
  for (int mask = 0; mask < kMaskCount; ++mask)
    if (comm_->times().calls[mask] > 0)
      comm_seconds_[mask].push_back(comm_->times().seconds[mask]);
  if (trace_->Traces(step)) STEPC_RETURN_IF_ERROR(trace_->EndStepKernels(step));
  trace_->Collectives(step, comm_->TakeCollectiveRecords());
  trace_->Metrics(step, SplitMetrics(module_->info(), last_.metrics));
  losses_.push_back(last_.loss);
  return LogStep(step, lr, seconds, counted);
}

// The metrics line and the progress line of a step.
absl::Status TrainingJob::LogStep(int64_t step, double lr, double seconds,
                                  std::optional<int64_t> counted) {
  const stepc_module_info& info = module_->info();
  // Throughput in what the model consumes: tokens for a language model,
  // samples (rows of the global batch) for any other.
  const bool lm = data_->language_model();
  const double rate = (lm ? double(info.tokens_per_step) : double(data_->samples_per_rank_step())) *
                      data_->data_world() / seconds;
  const double gflops = double(info.model_flops_per_step) * world_ / seconds / 1e9;
  const double mfu = peak_.gflops > 0 ? gflops / (peak_.gflops * world_) : 0;
  const bool finite = std::isfinite(last_.loss) && std::isfinite(last_.grad_norm);
  const std::vector<StepMetric> metrics = SplitMetrics(info, last_.metrics);
  step_seconds_.push_back(seconds);
  step_mfu_.push_back(mfu);
  STEPC_RETURN_IF_ERROR(metrics_->Write(absl::StrFormat(
      "{\"step\": %d, \"loss\": %s, \"lr\": %.6g, \"grad_norm\": %s, \"%s\": %.1f, "
      "\"gflops_per_s\": %.3f, \"planned_peak_bytes\": %d, \"measured_peak_bytes\": %d, "
      "\"baseline_bytes\": %d%s%s%s%s}\n",
      step, Json(last_.loss), lr, Json(last_.grad_norm), lm ? "tokens_per_s" : "samples_per_s",
      rate, gflops, session_->planned_bytes(), ReadResidentMemory().peak_bytes, baseline_bytes_,
      counted ? absl::StrFormat(", \"counted_targets\": %d", *counted) : "",
      peak_.gflops > 0
          ? absl::StrFormat(", \"mfu\": %.6f, \"peak_gflops_per_s\": %.3f", mfu, peak_.gflops)
          : "",
      MetricsJsonMember(metrics), finite ? "" : ", \"nonfinite\": true")));
  if (lead_ && (step % o_.log_every == 0 || step == first_step_ || step == steps_ || !finite))
    std::printf("step %5lld/%lld | loss %.4f%s | lr %.2e | norm %.3f%s | %.0f %s | %.2f GFLOP/s%s\n",
                static_cast<long long>(step), static_cast<long long>(steps_), last_.loss,
                counted ? absl::StrFormat(" over %d targets", *counted).c_str() : "", lr,
                last_.grad_norm, MetricsText(metrics).c_str(), rate, lm ? "tok/s" : "samples/s",
                gflops,
                peak_.gflops > 0 ? absl::StrFormat(" | MFU %.1f%%", 100 * mfu).c_str() : "");
  std::fflush(stdout);  // a killed run still shows how far it got
  return absl::OkStatus();
}

// A step's duties once it is logged: the plot, a non-finite loss,
// evaluation, sampling, checkpoints and a stop signal, in that order.
absl::Status TrainingJob::AfterStep(int64_t step) {
  if (step == first_step_ ||
      (step % o_.log_every == 0 && Clock::now() - last_plot_ > std::chrono::seconds(10)))
    STEPC_RETURN_IF_ERROR(WritePlot());
  // The metrics up to a failure are kept: they show how it diverged.
  if (!std::isfinite(last_.loss))
    return absl::InternalError(absl::StrCat("the loss is ", last_.loss, " at step ", step));
  if (evaluator_->enabled() && ((o_.eval_every > 0 && step % o_.eval_every == 0) || step == steps_))
    STEPC_RETURN_IF_ERROR(Traced("eval", step, [&] { return ReportEval(step); }));
  if (o_.sample_every > 0 && step % o_.sample_every == 0 && step != steps_)
    STEPC_RETURN_IF_ERROR(Traced("sample", step, [&] { return ReportSample(step, false); }));
  const bool saves = ShouldSaveCheckpoint(o_, step, steps_);
  if (saves) STEPC_RETURN_IF_ERROR(SaveCheckpoint(step));
  return StopOnSignal(step, saves);
}

// SIGTERM or SIGINT (a preempted or cancelled job): every rank stops after
// the same step, with a checkpoint to resume from.
absl::Status TrainingJob::StopOnSignal(int64_t step, bool saved) {
  int signal = StopSignal();
  if (world_ > 1) {
    STEPC_ASSIGN_OR_RETURN(const std::vector<uint64_t> all,
                           comm_->AllGather(static_cast<uint64_t>(signal)));
    for (uint64_t s : all) signal = std::max(signal, static_cast<int>(s));
  }
  if (signal == 0 || step >= steps_) return absl::OkStatus();
  if (!o_.checkpoint_dir.empty() && !saved) STEPC_RETURN_IF_ERROR(SaveCheckpoint(step));
  STEPC_RETURN_IF_ERROR(WritePlot());
  STEPC_RETURN_IF_ERROR(trace_->Write());
  return absl::CancelledError(absl::StrFormat(
      "stopped by %s after step %d of %d%s", signal == SIGINT ? "SIGINT" : "SIGTERM", step,
      steps_,
      o_.checkpoint_dir.empty()
          ? " (no --checkpoint-dir: nothing saved to resume from)"
          : absl::StrCat("; checkpoint ", CheckpointDirForStep(o_.checkpoint_dir, step),
                         ": the same command with --auto-resume (or --resume) continues")));
}

// A sample after `step` (collective under sharding): printed, and a
// metrics line. The last one draws with --seed itself, the ones while
// training with the step added, so they differ at a temperature.
absl::Status TrainingJob::ReportSample(int64_t step, bool final) {
  SampleOptions options;
  options.tokens = o_.sample;
  options.temperature = o_.temperature;
  options.top_k = o_.top_k;
  options.seed = final ? schedule_.seed : schedule_.seed + static_cast<uint64_t>(step);
  // Never an id past the vocabulary (a model's may be padded larger).
  options.vocabulary = sample_vocabulary_.size();
  const auto start = Clock::now();
  // A long sample says how far it is, every 10 s (stderr: stdout keeps
  // the text alone).
  double said = 0;
  if (lead_)
    options.progress = [&](int64_t drawn) {
      const double seconds = Since(start);
      if (seconds - said < 10.0 || drawn == options.tokens) return;
      said = seconds;
      std::fprintf(stderr, "stepc-run: sampling: %lld of %lld tokens, %.1f tokens/s\n",
                   static_cast<long long>(drawn), static_cast<long long>(options.tokens),
                   drawn / seconds);
    };
  STEPC_ASSIGN_OR_RETURN(const std::vector<int32_t> drawn,
                         Generate(*session_, prompt_ids_, options));
  const double seconds = Since(start);
  const std::string text =
      (from_end_of_text_ ? std::string() : o_.prompt) + sample_vocabulary_.Decode(drawn);
  // (Tokens may split a UTF-8 character: the JSON string replaces a
  // broken one rather than failing.)
  STEPC_RETURN_IF_ERROR(metrics_->Write(
      absl::StrFormat("{\"step\": %d, \"sample\": %s}\n", step,
                      json(text).dump(-1, ' ', false, json::error_handler_t::replace))));
  if (!lead_) return absl::OkStatus();
  const char* unit = sample_vocabulary_.by_character() ? "characters" : "tokens";
  if (final)
    std::printf("stepc-run: sample of %lld %s (temperature %g, top-k %lld, %.1f tokens/s):\n%s\n",
                static_cast<long long>(drawn.size()), unit, options.temperature,
                static_cast<long long>(options.top_k), drawn.size() / seconds, text.c_str());
  else
    std::printf("sample %5lld/%lld | %lld %s, %.2f s:\n%s\n", static_cast<long long>(step),
                static_cast<long long>(steps_), static_cast<long long>(drawn.size()), unit,
                seconds, text.c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

absl::Status TrainingJob::ReportEval(int64_t step) {
  STEPC_ASSIGN_OR_RETURN(const Evaluation e,
                         evaluator_->Run(*session_, *comm_, *data_, schedule_.seed));
  val_losses_.push_back({step, e.loss});
  const std::string accuracy_json =
      e.has_accuracy ? absl::StrFormat(", \"val_accuracy\": %.6f", e.accuracy) : "";
  STEPC_RETURN_IF_ERROR(
      metrics_->Write(absl::StrFormat("{\"step\": %d, \"val_loss\": %s%s, \"eval_batches\": %d}\n",
                                      step, Json(e.loss), accuracy_json, e.batches)));
  if (lead_) {
    std::printf("eval %5lld/%lld | val_loss %.4f%s | %lld batches, %.2f s\n",
                static_cast<long long>(step), static_cast<long long>(steps_), e.loss,
                e.has_accuracy ? absl::StrFormat(" | val_accuracy %.4f", e.accuracy).c_str() : "",
                static_cast<long long>(e.batches), e.seconds);
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

// --plot: written when the run ends, and refreshed while it goes (after the
// first step, so a killed run always leaves one, then at a progress line at
// most every 10 s: each write redraws every step).
absl::Status TrainingJob::WritePlot() {
  if (!lead_ || o_.plot.empty() || losses_.empty()) return absl::OkStatus();
  last_plot_ = Clock::now();
  return WriteLossPlot(
      o_.plot, LossPlot{losses_, first_step_, val_losses_, o_.plot_log,
                        absl::StrCat(std::filesystem::path(path_).filename().string(), ": ",
                                     module_->info().sharding, ", batch ", data_->global_batch(),
                                     " x ", data_->seq(), ", ", losses_.size(), " steps")});
}

absl::Status TrainingJob::SaveCheckpoint(int64_t step) {
  const double saving = MonotonicSeconds();
  const json trainer = {
      {"trainer", "stepc-run"},
      {"schedule", ScheduleJson(schedule_)},
      {"data", data_->identity()},
      {"last", {{"loss", Json(last_.loss)}, {"grad_norm", Json(last_.grad_norm)}}}};
  STEPC_RETURN_IF_ERROR(SaveTrainingCheckpoint(*session_, o_, step, trainer, lead_));
  trace_->Host("checkpoint", step, saving, MonotonicSeconds());
  return absl::OkStatus();
}

absl::Status TrainingJob::Finish() {
  STEPC_RETURN_IF_ERROR(GatherRankCommunication());
  if (lead_ && !step_seconds_.empty()) STEPC_RETURN_IF_ERROR(ReportRun());
  if (lead_ && session_->module().is_cuda())
    std::printf("stepc-run: device %s\n", session_->DescribeDevice().c_str());
  std::fflush(stdout);
  STEPC_RETURN_IF_ERROR(WritePlot());
  if (o_.sample > 0) STEPC_RETURN_IF_ERROR(ReportSample(steps_, /*final=*/true));
  if (!o_.save_outputs.empty())
    STEPC_RETURN_IF_ERROR(SaveOutputs(*session_, o_.save_outputs, rank_));
  if (!o_.save_safetensors.empty())
    STEPC_RETURN_IF_ERROR(SaveSafetensors(*session_, o_.save_safetensors, lead_));
  if (!o_.save_npy.empty())
    STEPC_RETURN_IF_ERROR(SaveNpy(*session_, o_.save_npy, rank_,
                                  trains_ ? std::optional<StepResult>(last_) : std::nullopt));
  return absl::OkStatus();
}

// Each rank's median time in collectives per step (nanoseconds), for the
// least over the ranks: the rank that arrives last at a collective waits
// only for the transfer; the others also for it (rank imbalance).
absl::Status TrainingJob::GatherRankCommunication() {
  if (world_ <= 1 || step_seconds_.empty() || module_->is_cuda()) return absl::OkStatus();
  std::vector<double> mine(step_seconds_.size(), 0.0);
  for (const auto& [mask, seconds] : comm_seconds_)
    if (seconds.size() == mine.size())
      for (size_t k = 0; k < seconds.size(); ++k) mine[k] += seconds[k];
  if (mine.size() > 1) mine.erase(mine.begin());
  std::sort(mine.begin(), mine.end());
  STEPC_ASSIGN_OR_RETURN(rank_comm_ns_,
                         comm_->AllGather(static_cast<uint64_t>(1e9 * mine[mine.size() / 2])));
  return absl::OkStatus();
}
// The end of the run on rank 0: the step time against its prediction, MFU
// and memory, the collectives' time per axes, a pipeline's idle time, and
// --summary's JSON.
absl::Status TrainingJob::ReportRun() {
  const size_t from = step_seconds_.size() > 1 ? 1 : 0;
  const double planned = double(session_->planned_bytes());
  // The data the process grew by (what the plan and the workspace
  // predict); the libraries' code paged in meanwhile is shown apart.
  const ResidentMemory now = ReadResidentMemory();
  const double measured = double(DataPeakAbove(baseline_, now) - probes_left_bytes_);
  const double code = double(std::max<int64_t>(0, now.file_bytes - baseline_.file_bytes));
  const double predicted_peak = double(predicted_peak_bytes_);
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
          ? absl::StrFormat("memory per rank: planned %.1f MB on the device, measured %.1f MB "
                            "of device memory above the session's start (%.2fx)",
                            planned / 1e6, *device_peak_bytes_ / 1e6,
                            planned > 0 ? *device_peak_bytes_ / planned : 0.0)
          : absl::StrFormat("memory per rank: predicted %.1f MB (planned %.1f MB + libraries "
                            "%.1f MB), measured %.1f MB of data above the process baseline "
                            "(%.2fx; and %.1f MB of library code paged in)",
                            predicted_peak / 1e6, planned / 1e6, workspace_.bytes() / 1e6,
                            measured / 1e6, predicted_peak > 0 ? measured / predicted_peak : 0.0,
                            code / 1e6);
  std::printf("stepc-run: %zu steps | step time median %s (steps %lld-%lld)%s%s | %s\n",
              step_seconds_.size(), Milliseconds(step_median).c_str(),
              static_cast<long long>(first_step_ + from), static_cast<long long>(steps_),
              predicted_.known ? absl::StrFormat(", predicted %s (%.2fx)",
                                                 Milliseconds(predicted_.seconds),
                                                 step_median / predicted_.seconds)
                                     .c_str()
                               : "",
              peak_.gflops > 0
                  ? absl::StrFormat(" | MFU median %.1f%%", 100 * MedianFrom(step_mfu_, from))
                        .c_str()
                  : "",
              memory_text.c_str());
  if (!comm_median.empty() && !module_->is_cuda()) PrintCommunication(comm_median, comm_total, from);
  const json pipeline = PipelineIdle(step_median);
  if (o_.summary.empty()) return absl::OkStatus();
  json summary = {
      {"steps", step_seconds_.size()},
      {"measured_from_step", first_step_ + static_cast<int64_t>(from)},
      {"step_seconds_median", step_median},
      {"planned_peak_bytes", session_->planned_bytes()},
      {"library_workspace_bytes", workspace_.bytes()},
      {"predicted_peak_bytes", predicted_peak_bytes_},
      {"measured_peak_bytes_above_baseline", now.peak_bytes - baseline_bytes_},
      {"measured_data_peak_bytes_above_baseline", int64_t(measured)},
      {"measured_device_bytes_above_baseline", device_peak_bytes_.value_or(-1)},
      {"rate_probes_left_bytes", probes_left_bytes_},
      {"library_code_bytes_paged_in", int64_t(code)},
      {"memory_ratio", device_peak_bytes_ ? (planned > 0 ? *device_peak_bytes_ / planned : 0.0)
                       : predicted_peak > 0 ? measured / predicted_peak
                                            : 0.0},
      {"collective_seconds_median", MedianFrom(comm_total, from)},
      {"collective_seconds_median_by_axes", comm_median},
  };
  return WriteRunSummary(summary, pipeline, from);
}

void TrainingJob::PrintCommunication(const std::map<std::string, double>& comm_median,
                                     const std::vector<double>& comm_total, size_t from) {
  std::string by_axes;
  for (const auto& [axes, seconds] : comm_median) {
    double want = -1;
    for (const AxisCommunication& a : comm_predicted_.axes)
      if (a.axes == axes) want = a.predicted_seconds;
    absl::StrAppend(&by_axes, by_axes.empty() ? "" : ", ", axes, " ",
                    absl::StrFormat("%.1f ms", 1e3 * seconds),
                    want > 0 ? absl::StrFormat(" (predicted %.1f ms, %.2fx)", 1e3 * want,
                                               seconds / want)
                             : "");
  }
  std::printf("stepc-run: time in collectives per step, median: %.1f ms on rank 0 (%s)%s\n",
              1e3 * MedianFrom(comm_total, from), by_axes.c_str(),
              rank_comm_ns_.empty()
                  ? ""
                  : absl::StrFormat("; least of the ranks %.1f ms, most %.1f ms (the "
                                    "difference waits for slower ranks)",
                                    1e-6 * *std::min_element(rank_comm_ns_.begin(),
                                                             rank_comm_ns_.end()),
                                    1e-6 * *std::max_element(rank_comm_ns_.begin(),
                                                             rank_comm_ns_.end()))
                        .c_str());
}

// A pipeline's idle time: each rank's waits for transfers and collectives
// over the step, against the schedule's prediction (printed; null without
// a pipeline).
json TrainingJob::PipelineIdle(double step_median) {
  const stepc_module_info& info = module_->info();
  json pipeline;
  if (info.pipeline_stages <= 1 || rank_comm_ns_.empty() || step_median <= 0 ||
      !info.report_json)
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
  std::printf("stepc-run: pipeline %s over %d micro-batches: idle per rank%s (waiting for "
              "transfers and collectives), predicted%s\n",
              pipeline.value("schedule", std::string("?")).c_str(),
              pipeline.value("micro_batches", 0), measured_text.c_str(),
              predicted_text.empty() ? " (none)" : predicted_text.c_str());
  return pipeline;
}

// --summary: the figures measured (`summary`), the pipeline's idle time and
// the predictions, one JSON object written whole.
absl::Status TrainingJob::WriteRunSummary(json summary, const json& pipeline, size_t from) {
  if (!rank_comm_ns_.empty()) {
    json per_rank = json::array();
    for (uint64_t ns : rank_comm_ns_) per_rank.push_back(1e-9 * double(ns));
    summary["collective_seconds_median_by_rank"] = per_rank;
  }
  if (!pipeline.is_null()) summary["pipeline"] = pipeline;
  if (peak_.gflops > 0) summary["mfu_median"] = MedianFrom(step_mfu_, from);
  if (predicted_.known) {
    summary["predicted_step_seconds"] = predicted_.seconds;
    summary["step_over_predicted"] =
        summary["step_seconds_median"].get<double>() / predicted_.seconds;
    summary["predicted"] = {{"gemm_seconds", predicted_.gemm_seconds},
                            {"attention_seconds", predicted_.attention_seconds},
                            {"memory_bound_seconds", predicted_.memory_seconds},
                            {"memory_bound_calls", predicted_.memory_bound_calls},
                            {"kernel_call_seconds", predicted_.kernel_call_seconds},
                            {"communication_seconds", predicted_.comm_seconds}};
  }
  json by_axes = json::object();
  for (const AxisCommunication& a : comm_predicted_.axes)
    by_axes[a.axes] = {{"seconds", a.predicted_seconds},
                       {"collectives", a.collectives},
                       {"wire_bytes", a.wire_bytes},
                       {"link_gbps", a.gbps},
                       {"latency_seconds", a.latency_seconds}};
  summary["predicted_collective_seconds_by_axes"] = by_axes;
  return WriteSummary(o_.summary, summary);
}

}  // namespace

absl::Status RunTrainingJob(const std::string& path, const TrainOptions& o,
                            std::shared_ptr<Communicator> comm) {
  TrainingJob job(path, o, std::move(comm));
  STEPC_RETURN_IF_ERROR(job.SetUp());
  STEPC_RETURN_IF_ERROR(job.Prepare());
  STEPC_RETURN_IF_ERROR(job.Train());
  return job.Finish();
}

}  // namespace stepc
