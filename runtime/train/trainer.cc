#include "runtime/train/trainer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "runtime/device/cpu_threads.h"
#include "runtime/status_macros.h"
#include "runtime/train/agreement.h"
#include "runtime/train/interrupt.h"
#include "runtime/train/job_state.h"
#include "runtime/train/observers/observer.h"
#include "runtime/train/outputs.h"

namespace stepc {
namespace {

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

// The training job as an object: set up (module, session, weights, data,
// the resume point, what was asked of the run checked), prepare (probes
// and predictions), train (the steps, each followed by its observers:
// trace, report, metrics line, plot, a non-finite loss, evaluation,
// sampling, checkpoint, stop signal; observers/observer.h) and finish (the
// observers' last words, the files asked for). RunTrainingJob runs the
// phases in order.
class TrainingJob {
 public:
  TrainingJob(std::string path, const TrainOptions& o, std::shared_ptr<Communicator> comm)
      : job_(std::move(path), o, std::move(comm)) {}

  absl::Status SetUp();
  absl::Status Prepare();
  absl::Status Train();
  absl::Status Finish();
  // A --profile build's table, written now (its file; empty: none), and
  // the rates of its floors.
  void ProfileFloor(std::string* path, FloorRates* rates) const {
    if (job_.profile_path.empty() || !job_.module->write_profile()) return;
    job_.module->write_profile()();
    *path = job_.profile_path;
    *rates = job_.floor_rates;
  }

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
  // Train: one step, measured.
  absl::StatusOr<StepEvent> RunStep(int64_t step);
  // Each observer's AfterStep; a stop signal's Stopping.
  absl::Status AfterStep(const StepEvent& e);

  JobState job_;
  std::vector<std::unique_ptr<Observer>> observers_;
  // Made in CheckRequests (a bad prompt is said before the first step),
  // observed in its place after the evaluation.
  std::unique_ptr<Observer> sampler_;
};

absl::Status TrainingJob::SetUp() {
  STEPC_RETURN_IF_ERROR(LoadModule());
  STEPC_RETURN_IF_ERROR(LoadWeights());
  STEPC_RETURN_IF_ERROR(OpenData());
  STEPC_RETURN_IF_ERROR(CheckRequests());
  // Streamed: a line per step, flushed, appended to on resume (rank 0).
  job_.metrics.emplace(job_.lead ? job_.o.metrics : "", job_.first_step);
  PrintHeader();
  // MFU: the model's FLOPs over every rank's peak (each rank's own, probed
  // on its threads; the ranks of a job are alike). Nothing to train: no probe.
  job_.trains = job_.first_step <= job_.steps;
  // --save-outputs evaluates the last batch a step trained on.
  if (!job_.trains && !job_.o.save_outputs.empty())
    return absl::FailedPreconditionError(
        "--save-outputs evaluates the last batch trained, and this run trains no step "
        "(--steps 0, or a checkpoint with none left)");
  return absl::OkStatus();
}

absl::Status TrainingJob::LoadModule() {
  STEPC_RETURN_IF_ERROR(ValidateOptions(job_.o));
  // Before step.so brings the OpenMP runtime: --threads, else an explicit
  // OMP_NUM_THREADS, else the cores divided among this node's ranks.
  const int threads = job_.o.threads > 0               ? job_.o.threads
                      : std::getenv("OMP_NUM_THREADS") ? 0
                                                       : DefaultCpuThreads();
  if (threads > 0) UseCpuThreads(threads);
  job_.shown_threads =
      threads > 0 ? std::to_string(threads) : std::string(std::getenv("OMP_NUM_THREADS"));
  STEPC_ASSIGN_OR_RETURN(std::unique_ptr<Module> loaded, Module::Load(job_.path));
  // A pipeline rank plans, predicts and runs its own stage's step; the
  // data are the first stage's (which reads the tokens).
  job_.first = std::move(loaded);
  STEPC_ASSIGN_OR_RETURN(job_.module,
                         Module::ForRank(job_.first, job_.comm->rank(), job_.comm->size()));
  // The process before the session holds anything: what its peak is
  // compared with the plan above.
  ResetResidentPeak();
  job_.baseline = ReadResidentMemory();
  STEPC_ASSIGN_OR_RETURN(job_.session, Session::Create(job_.module, job_.comm));
  job_.rank = job_.comm->rank();
  job_.world = job_.comm->size();
  job_.lead = job_.rank == 0;
  return absl::OkStatus();
}

absl::Status TrainingJob::LoadWeights() {
  // A resumed run takes its schedule (and seed, hence its batches) from the
  // checkpoint; its tensors are loaded once the data is known to match.
  STEPC_ASSIGN_OR_RETURN(job_.resume, FindResumePoint(job_.o));
  job_.schedule = OptionSchedule(job_.o);
  if (!job_.resume.dir.empty()) {
    STEPC_ASSIGN_OR_RETURN(
        job_.schedule, ResumedSchedule(job_.o, job_.resume.trainer, job_.resume.dir, job_.lead));
  }
  STEPC_RETURN_IF_ERROR(job_.session->InitParams(job_.schedule.seed));
  std::vector<std::string> not_loaded;
  std::vector<std::string>* missing = job_.o.init_missing ? &not_loaded : nullptr;
  if (!job_.o.init_npy.empty())
    STEPC_RETURN_IF_ERROR(LoadParams(*job_.session, job_.o.init_npy, missing));
  std::vector<std::string> unused;
  if (!job_.o.init_safetensors.empty())
    STEPC_RETURN_IF_ERROR(
        LoadSafetensors(*job_.session, job_.o.init_safetensors, missing, &unused));
  if (job_.lead && !unused.empty())
    std::fprintf(stderr,
                 "stepc-run: warning: --init-safetensors '%s' holds %zu tensor(s) that are no "
                 "parameter of this model, not loaded: %s\n",
                 job_.o.init_safetensors.c_str(), unused.size(),
                 absl::StrJoin(unused, ", ").c_str());
  if (job_.lead && !not_loaded.empty())
    std::printf(
        "stepc-run: --init-missing: %zu parameter(s) not in %s keep their "
        "initialisers' values: %s\n",
        not_loaded.size(),
        job_.o.init_npy.empty() ? job_.o.init_safetensors.c_str() : job_.o.init_npy.c_str(),
        absl::StrJoin(not_loaded, ", ").c_str());
  return absl::OkStatus();
}

absl::Status TrainingJob::OpenData() {
  // Resumed with no step left to train, no data named and nothing to
  // evaluate (e.g. only --sample): no training data is read; the
  // checkpoint's vocabulary decodes samples.
  const bool no_data = !job_.resume.dir.empty() && IsLanguageModel(*job_.module) &&
                       job_.schedule.steps <= job_.resume.info.step && !job_.o.Given("data") &&
                       !job_.o.Given("corpus") && !job_.o.Given("batch_npy") &&
                       job_.o.val_fraction == 0 && job_.o.val_data.empty() &&
                       job_.o.val_batch_npy.empty();
  STEPC_ASSIGN_OR_RETURN(DataSource data,
                         DataSource::Open(job_.o, *job_.first, job_.rank, job_.world, no_data));
  job_.data.emplace(std::move(data));
  if (job_.world > 1)
    STEPC_RETURN_IF_ERROR(
        AgreeOnRun(*job_.comm, job_.o, job_.schedule, job_.data->tokens(), job_.resume.dir));
  STEPC_RETURN_IF_ERROR(job_.data->OpenValidation(job_.o, *job_.first));
  if (!job_.resume.dir.empty()) {
    if (!no_data)
      STEPC_RETURN_IF_ERROR(job_.data->CheckResumed(job_.resume.trainer, job_.resume.dir));
    STEPC_RETURN_IF_ERROR(ResumeSession(*job_.session, job_.resume, job_.lead));
    job_.first_step = job_.session->steps_done() + 1;
  }
  job_.steps = job_.schedule.steps;
  return absl::OkStatus();
}

// Said before the first step, not after the last: a trace that would
// record nothing, a prompt the vocabulary cannot encode.
absl::Status TrainingJob::CheckRequests() {
  STEPC_ASSIGN_OR_RETURN(job_.trace_steps, ParseTraceSteps(job_.o.trace_steps));
  if (!job_.o.trace.empty() &&
      (job_.trace_steps.first > job_.steps || job_.trace_steps.last < job_.first_step))
    return absl::InvalidArgumentError(absl::StrFormat(
        "--trace-steps %s records no step of this run (steps %d to %d)%s", job_.o.trace_steps,
        job_.first_step, job_.steps, job_.o.Given("trace_steps") ? "" : ": give --trace-steps"));
  if (job_.lead && !job_.o.save_outputs.empty() && job_.module->info().logits_rank == 0)
    std::fprintf(stderr,
                 "stepc-run: note: %s returns no logits (its loss is not one f32 "
                 "cross-entropy whose logits the eval step can return): --save-outputs writes "
                 "the loss and the loss function's outputs only\n",
                 job_.path.c_str());
  if (job_.o.sample > 0) {
    STEPC_ASSIGN_OR_RETURN(sampler_, MakeSampleReport(job_));
  }
  return absl::OkStatus();
}

void TrainingJob::PrintHeader() {
  if (!job_.lead) return;
  const stepc_module_info& info = job_.module->info();
  // (Only a --warmup asked for: the default outlasting a short test run is
  // not news.)
  if (job_.steps > 0 && job_.schedule.warmup > job_.steps && job_.o.Given("warmup"))
    std::fprintf(stderr,
                 "stepc-run: warning: --warmup %lld is longer than --steps %lld: the learning rate "
                 "only reaches %.3g of --lr\n",
                 static_cast<long long>(job_.schedule.warmup), static_cast<long long>(job_.steps),
                 double(job_.steps) / double(job_.schedule.warmup));
  std::printf(
      "stepc-run: %s | planned %.1f MB | %s | %s | %lld steps%s%s\n", job_.path.c_str(),
      job_.session->planned_bytes() / 1e6, BatchText(info, job_.data->data_world()).c_str(),
      job_.data->Describe().c_str(), static_cast<long long>(job_.steps),
      job_.world > 1 ? absl::StrCat(" | ", job_.world, " ranks (", info.sharding, ")").c_str() : "",
      job_.module->is_cuda() ? "" : absl::StrCat(" | ", job_.shown_threads, " threads").c_str());
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
  if (job_.trains && !job_.module->is_cuda()) {
    STEPC_ASSIGN_OR_RETURN(job_.workspace, ProbeLibraryWorkspace(*job_.module, *job_.comm));
  }
  const ResidentMemory before_rate_probes = ReadResidentMemory();
  STEPC_RETURN_IF_ERROR(PredictTime());
  STEPC_RETURN_IF_ERROR(PredictLinks());
  // The rate probes' buffers are freed: forgotten in the peak. What they
  // left resident (a 1024³ GEMM's packing beyond the step's shapes, heap
  // kept) is no part of the step's memory.
  ResetResidentPeak();
  job_.probes_left_bytes =
      std::max<int64_t>(0, ReadResidentMemory().data_bytes - before_rate_probes.data_bytes);
  job_.predicted_peak_bytes = job_.session->planned_bytes() + job_.workspace.bytes();
  PrintPredictions();
  if (job_.lead && job_.steps == 0)
    std::printf("stepc-run: --steps 0: no training step\n");
  else if (job_.lead && job_.first_step > job_.steps)
    std::printf("stepc-run: the checkpoint is at step %lld of %lld: nothing left to train\n",
                static_cast<long long>(job_.first_step - 1), static_cast<long long>(job_.steps));
  // --trace: the steps asked for, on every rank (each its own file).
  job_.trace.emplace(job_.o.trace, job_.trace_steps, job_.rank, *job_.module);
  if (job_.lead && job_.trace->enabled() && !job_.trace->has_kernels())
    std::fprintf(stderr,
                 "stepc-run: --trace: %s has no kernel timers (build it with stepc --profile): "
                 "tracing the host's phases only\n",
                 job_.path.c_str());
  return absl::OkStatus();
}

// The step time predicted before step 1, compared with the measured at the
// end; the peak that MFU divides by.
absl::Status TrainingJob::PredictTime() {
  const stepc_module_info& info = job_.module->info();
  job_.peak = job_.trains ? FindPeak(*job_.module, job_.o.peak_tflops, job_.shown_threads,
                                     job_.module->is_cuda() ? job_.session->DescribeDevice() : "")
                          : PeakRate{};
  // On several ranks each rate is the slowest rank's (exchanged).
  absl::Status exchanged = absl::OkStatus();
  const SlowestOfRanks slowest_of_ranks = [&](double mine) {
    uint64_t bits;
    std::memcpy(&bits, &mine, sizeof bits);
    absl::StatusOr<std::vector<uint64_t>> all = job_.comm->AllGather(bits);
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
  job_.predicted =
      !job_.trains ? StepPrediction{}
      : job_.module->is_cuda()
          ? PredictCudaStep(*job_.module, job_.peak, job_.session->DescribeDevice())
          : stepc::PredictStep(
                *job_.module, job_.peak, std::max(1, std::atoi(job_.shown_threads.c_str())),
                // A pipeline's stages differ in shapes: each
                // its own.
                job_.world > 1 && info.pipeline_stages <= 1 ? slowest_of_ranks : nullptr);
  STEPC_RETURN_IF_ERROR(exchanged);
  // A --profile build that writes its table to $STEPC_PROFILE: the floors
  // its kinds are printed against when it is unloaded (the lead rank's).
  const char* profile = std::getenv("STEPC_PROFILE");
  if (job_.trains && job_.lead && job_.module->trace() && profile && *profile) {
    job_.profile_path = job_.world > 1 ? absl::StrCat(profile, ".rank", job_.rank) : profile;
    const std::string device = job_.module->is_cuda() ? job_.session->DescribeDevice() : "";
    const GpuMemoryRate hbm = FindGpuMemoryRate(device);
    job_.floor_rates = job_.module->is_cuda()
                           ? FloorRates{job_.peak.gflops, hbm.gbps, hbm.source}
                           : FloorRates{job_.peak.gflops, job_.predicted.memory_gbps,
                                        job_.predicted.memory_source};
  }
  // The same GEMM kernel reached more on one of the step's shapes than on
  // the 1024³ probe (a noisy probe): the peak is at least that, so MFU
  // never exceeds 100% of what the kernel was seen to do.
  if (job_.o.peak_tflops <= 0 && job_.predicted.best_gemm_gflops > job_.peak.gflops &&
      job_.peak.gflops > 0) {
    job_.peak.gflops = job_.predicted.best_gemm_gflops;
    job_.peak.source += ", raised to the fastest of the step's GEMM shapes";
  }
  if (job_.lead && job_.trains)
    std::printf(job_.peak.gflops > 0 ? "stepc-run: peak %.1f GFLOP/s per rank (%s)\n"
                                     : "stepc-run: no MFU (%.0f: %s)\n",
                job_.peak.gflops, job_.peak.source.c_str());
  return absl::OkStatus();
}

// Communication, unless stepc --link-gbps predicted it: the job's own
// link, probed on every rank (collective) before step 1.
absl::Status TrainingJob::PredictLinks() {
  if (!job_.trains || job_.world <= 1 || job_.module->is_cuda()) return absl::OkStatus();
  // (A pipeline's ranks probe alike on stage 0's figures.)
  STEPC_ASSIGN_OR_RETURN(job_.comm_predicted, stepc::PredictCommunication(*job_.comm, *job_.first));
  if (job_.predicted.known && job_.comm_predicted.known && job_.predicted.comm_seconds == 0) {
    job_.predicted.comm_seconds = job_.comm_predicted.seconds;
    job_.predicted.seconds += job_.comm_predicted.seconds;
  }
  return absl::OkStatus();
}

void TrainingJob::PrintPredictions() {
  if (!job_.lead) return;
  if (job_.workspace.known)
    std::printf(
        "stepc-run: predicted memory %.1f MB per rank (the plan's %.1f MB + the "
        "libraries' workspace %.1f MB: GEMM %.1f MB on %d shapes, collectives %.1f MB "
        "on %d kinds%s, probed)\n",
        job_.predicted_peak_bytes / 1e6, job_.session->planned_bytes() / 1e6,
        job_.workspace.bytes() / 1e6, job_.workspace.gemm_bytes / 1e6, job_.workspace.gemm_shapes,
        job_.workspace.collective_bytes / 1e6, job_.workspace.collective_kinds,
        job_.workspace.collectives_in_flight > 0
            ? absl::StrFormat(" and %d in flight together", job_.workspace.collectives_in_flight)
                  .c_str()
            : "");
  const StepPrediction& p = job_.predicted;
  if (p.known && p.datasheet)
    std::printf(
        "stepc-run: predicted step %.3f ms per rank (every product %.3f ms at the "
        "peak, memory-bound kernels %.3f ms at %.0f GB/s (%s)%s; a roofline: launches "
        "and kernels below the peak not counted)\n",
        1e3 * p.seconds, 1e3 * p.gemm_seconds, 1e3 * p.memory_seconds, p.memory_gbps,
        p.memory_source.c_str(),
        p.comm_seconds > 0
            ? absl::StrFormat(", exposed communication %.3f ms", 1e3 * p.comm_seconds).c_str()
            : "");
  else if (p.known)
    std::printf(
        "stepc-run: predicted step %.1f ms per rank (GEMMs and attention %.1f ms at "
        "the rates of their %d + %d shapes, memory-bound kernels %.1f ms at %.1f GB/s "
        "(%s)%s%s)\n",
        1e3 * p.seconds, 1e3 * p.gemm_seconds, p.gemm_shapes, p.attention_shapes,
        1e3 * p.memory_seconds, p.memory_gbps, p.memory_source.c_str(),
        p.kernel_call_seconds > 0
            ? absl::StrFormat(" + %.1f us for each of their %d calls", 1e6 * p.kernel_call_seconds,
                              p.memory_bound_calls)
                  .c_str()
            : "",
        p.comm_seconds > 0
            ? absl::StrFormat(", exposed communication %.1f ms", 1e3 * p.comm_seconds).c_str()
            : "");
  if (job_.comm_predicted.known)
    for (const AxisCommunication& a : job_.comm_predicted.axes)
      std::printf(
          "stepc-run: predicted communication on %s: %.1f ms per step (%lld "
          "collectives, %.2f MB on the wire per rank; link probed on %d ranks: %.2f "
          "GB/s after %.1f us)\n",
          a.axes.c_str(), 1e3 * a.predicted_seconds, static_cast<long long>(a.collectives),
          a.wire_bytes / 1e6, a.ranks, a.gbps, 1e6 * a.latency_seconds);
}

absl::Status TrainingJob::Train() {
  observers_.push_back(MakeTraceWriter());
  observers_.push_back(MakeRunReport());
  observers_.push_back(MakeStepLog());
  observers_.push_back(MakePlotWriter());
  observers_.push_back(MakeNonFiniteStop());
  observers_.push_back(MakeEvalReport(job_));
  if (sampler_) observers_.push_back(std::move(sampler_));
  observers_.push_back(MakeCheckpointSaver());
  observers_.push_back(MakeSignalStop());
  for (const std::unique_ptr<Observer>& observer : observers_)
    STEPC_RETURN_IF_ERROR(observer->BeforeSteps(job_));
  // Caught while the steps run only: a signal during the final sample or
  // the writes after it ends the process as it always has.
  InterruptGuard interrupts;
  for (int64_t step = job_.first_step; step <= job_.steps; ++step) {
    STEPC_ASSIGN_OR_RETURN(const StepEvent e, RunStep(step));
    STEPC_RETURN_IF_ERROR(AfterStep(e));
  }
  return absl::OkStatus();
}

absl::StatusOr<StepEvent> TrainingJob::RunStep(int64_t step) {
  JobState& j = job_;
  STEPC_RETURN_IF_ERROR(
      j.Traced("data", step, [&] { return j.data->SetStep(*j.session, j.schedule.seed, step); }));
  StepEvent e;
  e.step = step;
  // A loss that leaves targets out (SFT's prompts) averages over the
  // counted ones: the whole batch's count is logged beside the loss (tp
  // ranks hold the same rows: each data rank is counted once).
  e.counted = j.session->CountedTargets();
  if (e.counted && j.world > 1) {
    STEPC_ASSIGN_OR_RETURN(const std::vector<uint64_t> all,
                           j.comm->AllGather(static_cast<uint64_t>(*e.counted)));
    uint64_t sum = 0;
    for (uint64_t c : all) sum += c;
    e.counted = static_cast<int64_t>(sum / (j.world / j.data->data_world()));
  }
  e.lr = LearningRate(j.schedule, step);
  const double start = MonotonicSeconds();
  j.comm->ResetTimes();
  j.comm->RecordCollectives(j.trace->Traces(step) && j.world > 1);
  STEPC_RETURN_IF_ERROR(j.Traced("step", step, [&]() -> absl::Status {
    // (Inside the step's span: a CUDA step's kernels are placed from here.)
    if (j.trace->Traces(step)) j.trace->BeginStepKernels();
    STEPC_ASSIGN_OR_RETURN(j.last, j.session->Step(static_cast<float>(e.lr)));
    return absl::OkStatus();
  }));
  e.seconds = MonotonicSeconds() - start;
  e.device_bytes = j.session->DeviceMemoryAboveBaseline();
  for (int mask = 0; mask < kMaskCount; ++mask)
    if (j.comm->times().calls[mask] > 0) e.comm_seconds[mask] = j.comm->times().seconds[mask];
  if (j.trace->Traces(step)) STEPC_RETURN_IF_ERROR(j.trace->EndStepKernels(step));
  j.losses.push_back(j.last.loss);
  // Throughput in what the model consumes: tokens for a language model,
  // samples (rows of the global batch) for any other; MFU over every
  // rank's peak.
  const stepc_module_info& info = j.module->info();
  e.rate = (j.data->language_model() ? double(info.tokens_per_step)
                                     : double(j.data->samples_per_rank_step())) *
           j.data->data_world() / e.seconds;
  e.gflops = double(info.model_flops_per_step) * j.world / e.seconds / 1e9;
  e.mfu = j.peak.gflops > 0 ? e.gflops / (j.peak.gflops * j.world) : 0;
  return e;
}

absl::Status TrainingJob::AfterStep(const StepEvent& e) {
  for (const std::unique_ptr<Observer>& observer : observers_) {
    absl::Status status = observer->AfterStep(job_, e);
    if (absl::IsCancelled(status))
      for (const std::unique_ptr<Observer>& other : observers_)
        STEPC_RETURN_IF_ERROR(other->Stopping(job_, e.step));
    STEPC_RETURN_IF_ERROR(status);
  }
  return absl::OkStatus();
}

absl::Status TrainingJob::Finish() {
  for (const std::unique_ptr<Observer>& observer : observers_)
    STEPC_RETURN_IF_ERROR(observer->Finish(job_));
  const TrainOptions& o = job_.o;
  Session& session = *job_.session;
  if (!o.save_outputs.empty())
    STEPC_RETURN_IF_ERROR(SaveOutputs(session, o.save_outputs, job_.rank));
  if (!o.save_safetensors.empty())
    STEPC_RETURN_IF_ERROR(SaveSafetensors(session, o.save_safetensors, job_.lead));
  if (!o.save_npy.empty())
    STEPC_RETURN_IF_ERROR(
        SaveNpy(session, o.save_npy, job_.rank,
                job_.trains ? std::optional<StepResult>(job_.last) : std::nullopt));
  return absl::OkStatus();
}

}  // namespace

absl::Status RunTrainingJob(const std::string& path, const TrainOptions& o,
                            std::shared_ptr<Communicator> comm) {
  TrainingJob job(path, o, std::move(comm));
  STEPC_RETURN_IF_ERROR(job.SetUp());
  STEPC_RETURN_IF_ERROR(job.Prepare());
  STEPC_RETURN_IF_ERROR(job.Train());
  STEPC_RETURN_IF_ERROR(job.Finish());
  // A --profile build's table, written now, against the floors.
  std::string profile_path;
  FloorRates rates;
  job.ProfileFloor(&profile_path, &rates);
  if (!profile_path.empty()) {
    std::ifstream in(profile_path);
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<std::string> table = ProfileFloorTable(text.str(), rates);
    if (table.ok())
      std::printf("%s", table->c_str());
    else
      std::printf("stepc-run: no floor table for '%s': %s\n", profile_path.c_str(),
                  std::string(table.status().message()).c_str());
  }
  return absl::OkStatus();
}

}  // namespace stepc
