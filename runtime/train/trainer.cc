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
#include "runtime/cpu_threads.h"
#include "runtime/session.h"
#include "runtime/status_macros.h"
#include "runtime/train/agreement.h"
#include "runtime/train/checkpoint_policy.h"
#include "runtime/train/data_source.h"
#include "runtime/train/evaluation.h"
#include "runtime/train/interrupt.h"
#include "runtime/train/loss_plot.h"
#include "runtime/train/metrics_log.h"
#include "runtime/train/outputs.h"
#include "runtime/train/peak.h"
#include "runtime/atomic_file.h"
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

}  // namespace

absl::Status RunTrainingJob(const std::string& path, const TrainOptions& o,
                            std::shared_ptr<Communicator> comm) {
  STEPC_RETURN_IF_ERROR(ValidateOptions(o));
  // Before step.so brings the OpenMP runtime: --threads, else an explicit
  // OMP_NUM_THREADS, else the cores divided among this node's ranks.
  const int threads = o.threads > 0                    ? o.threads
                      : std::getenv("OMP_NUM_THREADS") ? 0
                                                       : DefaultCpuThreads();
  if (threads > 0) UseCpuThreads(threads);
  const std::string shown_threads =
      threads > 0 ? std::to_string(threads) : std::string(std::getenv("OMP_NUM_THREADS"));
  STEPC_ASSIGN_OR_RETURN(std::unique_ptr<Module> loaded, Module::Load(path));
  // A pipeline rank plans, predicts and runs its own stage's step; the
  // data are the first stage's (which reads the tokens).
  const std::shared_ptr<const Module> first(std::move(loaded));
  STEPC_ASSIGN_OR_RETURN(std::shared_ptr<const Module> module,
                         Module::ForRank(first, comm->rank(), comm->size()));
  const stepc_module_info& info = module->info();
  // The process before the session holds anything: what its peak is
  // compared with the plan above.
  ResetResidentPeak();
  const ResidentMemory baseline = ReadResidentMemory();
  const int64_t baseline_bytes = baseline.peak_bytes;
  STEPC_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(module, comm));
  const int rank = comm->rank(), world = comm->size();
  const bool lead = rank == 0;

  // A resumed run takes its schedule (and seed, hence its batches) from the
  // checkpoint; its tensors are loaded once the data is known to match.
  STEPC_ASSIGN_OR_RETURN(const ResumePoint resume, FindResumePoint(o));
  Schedule schedule = OptionSchedule(o);
  if (!resume.dir.empty()) {
    STEPC_ASSIGN_OR_RETURN(schedule, ResumedSchedule(o, resume.trainer, resume.dir, lead));
  }
  STEPC_RETURN_IF_ERROR(session->InitParams(schedule.seed));
  std::vector<std::string> not_loaded;
  std::vector<std::string>* missing = o.init_missing ? &not_loaded : nullptr;
  if (!o.init_npy.empty()) STEPC_RETURN_IF_ERROR(LoadParams(*session, o.init_npy, missing));
  std::vector<std::string> unused;
  if (!o.init_safetensors.empty())
    STEPC_RETURN_IF_ERROR(LoadSafetensors(*session, o.init_safetensors, missing, &unused));
  if (lead && !unused.empty())
    std::fprintf(stderr,
                 "stepc-run: warning: --init-safetensors '%s' holds %zu tensor(s) that are no "
                 "parameter of this model, not loaded: %s\n",
                 o.init_safetensors.c_str(), unused.size(), absl::StrJoin(unused, ", ").c_str());
  if (lead && !not_loaded.empty())
    std::printf("stepc-run: --init-missing: %zu parameter(s) not in %s keep their "
                "initialisers' values: %s\n",
                not_loaded.size(), o.init_npy.empty() ? o.init_safetensors.c_str() : o.init_npy.c_str(),
                absl::StrJoin(not_loaded, ", ").c_str());

  // Resumed with no step left to train, no data named and nothing to
  // evaluate (e.g. only --sample): no training data is read; the
  // checkpoint's vocabulary decodes samples.
  const bool no_data = !resume.dir.empty() && IsLanguageModel(*module) &&
                       schedule.steps <= resume.info.step &&
                       !o.Given("data") && !o.Given("corpus") && !o.Given("batch_npy") &&
                       o.val_fraction == 0 && o.val_data.empty() && o.val_batch_npy.empty();
  STEPC_ASSIGN_OR_RETURN(DataSource data, DataSource::Open(o, *first, rank, world, no_data));
  if (world > 1) STEPC_RETURN_IF_ERROR(AgreeOnRun(*comm, o, schedule, data.tokens(), resume.dir));
  STEPC_RETURN_IF_ERROR(data.OpenValidation(o, *first));
  const Evaluator evaluator(o, *module, data);

  int64_t first_step = 1;
  if (!resume.dir.empty()) {
    if (!no_data) STEPC_RETURN_IF_ERROR(data.CheckResumed(resume.trainer, resume.dir));
    STEPC_RETURN_IF_ERROR(ResumeSession(*session, resume, lead));
    first_step = session->steps_done() + 1;
  }

  const int64_t steps = schedule.steps;
  // Said before the first step, not after the last: a trace that would
  // record nothing, a prompt the vocabulary cannot encode.
  STEPC_ASSIGN_OR_RETURN(const TraceSteps trace_steps, ParseTraceSteps(o.trace_steps));
  if (!o.trace.empty() && (trace_steps.first > steps || trace_steps.last < first_step))
    return absl::InvalidArgumentError(absl::StrFormat(
        "--trace-steps %s records no step of this run (steps %d to %d)%s", o.trace_steps,
        first_step, steps, o.Given("trace_steps") ? "" : ": give --trace-steps"));
  if (lead && !o.save_outputs.empty() && module->info().logits_rank == 0)
    std::fprintf(stderr,
                 "stepc-run: note: %s returns no logits (its loss is not one f32 "
                 "cross-entropy whose logits the eval step can return): --save-outputs writes "
                 "the loss and the loss function's outputs only\n",
                 path.c_str());
  Vocabulary sample_vocabulary;
  std::vector<int32_t> prompt_ids;
  // A token vocabulary's sample with no --prompt starts from end of text,
  // as llm.c's do.
  bool from_end_of_text = false;
  if (o.sample > 0) {
    STEPC_RETURN_IF_ERROR(CheckCanSample(*module));
    STEPC_ASSIGN_OR_RETURN(sample_vocabulary, SampleVocabulary(data.vocabulary(), resume.trainer));
    from_end_of_text = !o.Given("prompt") && sample_vocabulary.end_of_text() >= 0;
    if (from_end_of_text) {
      prompt_ids = {sample_vocabulary.end_of_text()};
    } else {
      STEPC_ASSIGN_OR_RETURN(prompt_ids, sample_vocabulary.Encode(o.prompt));
    }
  }
  // Streamed: a line per step, flushed, appended to on resume (rank 0).
  MetricsLog metrics(lead ? o.metrics : "", first_step);
  // (Only a --warmup asked for: the default outlasting a short test run is
  // not news.)
  if (lead && steps > 0 && schedule.warmup > steps && o.Given("warmup"))
    std::fprintf(stderr,
                 "stepc-run: warning: --warmup %lld is longer than --steps %lld: the learning rate "
                 "only reaches %.3g of --lr\n",
                 static_cast<long long>(schedule.warmup), static_cast<long long>(steps),
                 double(steps) / double(schedule.warmup));
  if (lead)
    std::printf("stepc-run: %s | planned %.1f MB | %s | %s | %lld steps%s%s\n", path.c_str(),
                session->planned_bytes() / 1e6, BatchText(info, data.data_world()).c_str(),
                data.Describe().c_str(), static_cast<long long>(steps),
                world > 1 ? absl::StrCat(" | ", world, " ranks (", info.sharding, ")").c_str() : "",
                module->is_cuda() ? "" : absl::StrCat(" | ", shown_threads, " threads").c_str());
  // Frozen parameters: those without optimizer state (every optimizer keeps
  // an exp_avg for each parameter it trains).
  if (lead) {
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
  // MFU: the model's FLOPs over every rank's peak (each rank's own, probed
  // on its threads; the ranks of a job are alike). Nothing to train: no probe.
  const bool trains = first_step <= steps;
  // --save-outputs evaluates the last batch a step trained on.
  if (!trains && !o.save_outputs.empty())
    return absl::FailedPreconditionError(
        "--save-outputs evaluates the last batch trained, and this run trains no step "
        "(--steps 0, or a checkpoint with none left)");
  // The libraries' own memory beside the plan (BLAS buffers, MPI's
  // temporaries), probed on every rank before any other probe has used
  // them.
  LibraryWorkspace workspace;
  if (trains && !module->is_cuda()) {
    STEPC_ASSIGN_OR_RETURN(workspace, ProbeLibraryWorkspace(*module, *comm));
  }
  const ResidentMemory before_rate_probes = ReadResidentMemory();
  PeakRate peak = trains ? FindPeak(*module, o.peak_tflops, shown_threads,
                                    module->is_cuda() ? session->DescribeDevice() : "")
                         : PeakRate{};
  // The step time predicted before step 1, compared with the measured at
  // the end.
  // On several ranks each rate is the slowest rank's (exchanged).
  absl::Status exchanged = absl::OkStatus();
  const SlowestOfRanks slowest_of_ranks = [&](double mine) {
    uint64_t bits;
    std::memcpy(&bits, &mine, sizeof bits);
    absl::StatusOr<std::vector<uint64_t>> all = comm->AllGather(bits);
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
  StepPrediction predicted =
      !trains             ? StepPrediction{}
      : module->is_cuda() ? PredictCudaStep(*module, peak, session->DescribeDevice())
                          : PredictStep(*module, peak, std::max(1, std::atoi(shown_threads.c_str())),
                                        // A pipeline's stages differ in shapes: each its own.
                                        world > 1 && info.pipeline_stages <= 1 ? slowest_of_ranks
                                                                               : nullptr);
  STEPC_RETURN_IF_ERROR(exchanged);
  // The same GEMM kernel reached more on one of the step's shapes than on
  // the 1024³ probe (a noisy probe): the peak is at least that, so MFU
  // never exceeds 100% of what the kernel was seen to do.
  if (o.peak_tflops <= 0 && predicted.best_gemm_gflops > peak.gflops && peak.gflops > 0) {
    peak.gflops = predicted.best_gemm_gflops;
    peak.source += ", raised to the fastest of the step's GEMM shapes";
  }
  if (lead && trains)
    std::printf(peak.gflops > 0 ? "stepc-run: peak %.1f GFLOP/s per rank (%s)\n"
                                : "stepc-run: no MFU (%.0f: %s)\n",
                peak.gflops, peak.source.c_str());
  // Communication, unless stepc --link-gbps predicted it: the job's own
  // link, probed on every rank (collective) before step 1.
  CommunicationPrediction comm_predicted;
  if (trains && world > 1 && !module->is_cuda()) {
    // (A pipeline's ranks probe alike on stage 0's figures.)
    STEPC_ASSIGN_OR_RETURN(comm_predicted, PredictCommunication(*comm, *first));
    if (predicted.known && comm_predicted.known && predicted.comm_seconds == 0) {
      predicted.comm_seconds = comm_predicted.seconds;
      predicted.seconds += comm_predicted.seconds;
    }
  }
  // The rate probes' buffers are freed: forgotten in the peak. What they
  // left resident (a 1024³ GEMM's packing beyond the step's shapes, heap
  // kept) is no part of the step's memory.
  ResetResidentPeak();
  const int64_t probes_left_bytes =
      std::max<int64_t>(0, ReadResidentMemory().data_bytes - before_rate_probes.data_bytes);
  const int64_t predicted_peak_bytes = session->planned_bytes() + workspace.bytes();
  if (lead && workspace.known)
    std::printf("stepc-run: predicted memory %.1f MB per rank (the plan's %.1f MB + the "
                "libraries' workspace %.1f MB: GEMM %.1f MB on %d shapes, collectives %.1f MB "
                "on %d kinds%s, probed)\n",
                predicted_peak_bytes / 1e6, session->planned_bytes() / 1e6,
                workspace.bytes() / 1e6, workspace.gemm_bytes / 1e6, workspace.gemm_shapes,
                workspace.collective_bytes / 1e6, workspace.collective_kinds,
                workspace.collectives_in_flight > 0
                    ? absl::StrFormat(" and %d in flight together",
                                      workspace.collectives_in_flight)
                          .c_str()
                    : "");
  if (lead && predicted.known && predicted.datasheet)
    std::printf("stepc-run: predicted step %.3f ms per rank (every product %.3f ms at the "
                "peak, memory-bound kernels %.3f ms at %.0f GB/s (%s)%s; a roofline: launches "
                "and kernels below the peak not counted)\n",
                1e3 * predicted.seconds, 1e3 * predicted.gemm_seconds,
                1e3 * predicted.memory_seconds, predicted.memory_gbps,
                predicted.memory_source.c_str(),
                predicted.comm_seconds > 0
                    ? absl::StrFormat(", exposed communication %.3f ms",
                                      1e3 * predicted.comm_seconds)
                          .c_str()
                    : "");
  else if (lead && predicted.known)
    std::printf("stepc-run: predicted step %.1f ms per rank (GEMMs and attention %.1f ms at "
                "the rates of their %d + %d shapes, memory-bound kernels %.1f ms at %.1f GB/s "
                "(%s)%s%s)\n",
                1e3 * predicted.seconds, 1e3 * predicted.gemm_seconds, predicted.gemm_shapes,
                predicted.attention_shapes,
                1e3 * predicted.memory_seconds, predicted.memory_gbps,
                predicted.memory_source.c_str(),
                predicted.kernel_call_seconds > 0
                    ? absl::StrFormat(" + %.1f us for each of their %d calls",
                                      1e6 * predicted.kernel_call_seconds,
                                      predicted.memory_bound_calls)
                          .c_str()
                    : "",
                predicted.comm_seconds > 0
                    ? absl::StrFormat(", exposed communication %.1f ms",
                                      1e3 * predicted.comm_seconds)
                          .c_str()
                    : "");
  if (lead && comm_predicted.known)
    for (const AxisCommunication& a : comm_predicted.axes)
      std::printf("stepc-run: predicted communication on %s: %.1f ms per step (%lld "
                  "collectives, %.2f MB on the wire per rank; link probed on %d ranks: %.2f "
                  "GB/s after %.1f us)\n",
                  a.axes.c_str(), 1e3 * a.predicted_seconds,
                  static_cast<long long>(a.collectives), a.wire_bytes / 1e6, a.ranks, a.gbps,
                  1e6 * a.latency_seconds);
  if (lead && steps == 0)
    std::printf("stepc-run: --steps 0: no training step\n");
  else if (lead && first_step > steps)
    std::printf("stepc-run: the checkpoint is at step %lld of %lld: nothing left to train\n",
                static_cast<long long>(first_step - 1), static_cast<long long>(steps));

  // --trace: the steps asked for, on every rank (each its own file).
  Trace trace(o.trace, trace_steps, rank, *module);
  if (lead && trace.enabled() && !trace.has_kernels())
    std::fprintf(stderr,
                 "stepc-run: --trace: %s has no kernel timers (build it with stepc --profile): "
                 "tracing the host's phases only\n",
                 path.c_str());
  // A host phase of `step` in the trace: the time `body` takes.
  auto traced = [&](const char* name, int64_t step, auto&& body) -> absl::Status {
    const double start = MonotonicSeconds();
    absl::Status status = body();
    trace.Host(name, step, start, MonotonicSeconds());
    return status;
  };

  std::vector<float> losses;
  std::vector<std::pair<int64_t, double>> val_losses;
  // A sample after `step` (collective under sharding): printed, and a
  // metrics line. The last one draws with --seed itself, the ones while
  // training with the step added, so they differ at a temperature.
  auto report_sample = [&](int64_t step, bool final) -> absl::Status {
    SampleOptions options;
    options.tokens = o.sample;
    options.temperature = o.temperature;
    options.top_k = o.top_k;
    options.seed = final ? schedule.seed : schedule.seed + static_cast<uint64_t>(step);
    // Never an id past the vocabulary (a model's may be padded larger).
    options.vocabulary = sample_vocabulary.size();
    const auto start = Clock::now();
    // A long sample says how far it is, every 10 s (stderr: stdout keeps
    // the text alone).
    double said = 0;
    if (lead)
      options.progress = [&](int64_t drawn) {
        const double seconds = Since(start);
        if (seconds - said < 10.0 || drawn == options.tokens) return;
        said = seconds;
        std::fprintf(stderr, "stepc-run: sampling: %lld of %lld tokens, %.1f tokens/s\n",
                     static_cast<long long>(drawn), static_cast<long long>(options.tokens),
                     drawn / seconds);
      };
    STEPC_ASSIGN_OR_RETURN(const std::vector<int32_t> drawn,
                           Generate(*session, prompt_ids, options));
    const double seconds = Since(start);
    const std::string text =
        (from_end_of_text ? std::string() : o.prompt) + sample_vocabulary.Decode(drawn);
    // (Tokens may split a UTF-8 character: the JSON string replaces a
    // broken one rather than failing.)
    STEPC_RETURN_IF_ERROR(metrics.Write(absl::StrFormat(
        "{\"step\": %d, \"sample\": %s}\n", step,
        json(text).dump(-1, ' ', false, json::error_handler_t::replace))));
    if (lead) {
      const char* unit = sample_vocabulary.by_character() ? "characters" : "tokens";
      if (final)
        std::printf("stepc-run: sample of %lld %s (temperature %g, top-k %lld, %.1f tokens/s):\n%s\n",
                    static_cast<long long>(drawn.size()), unit, options.temperature,
                    static_cast<long long>(options.top_k), drawn.size() / seconds, text.c_str());
      else
        std::printf("sample %5lld/%lld | %lld %s, %.2f s:\n%s\n", static_cast<long long>(step),
                    static_cast<long long>(steps), static_cast<long long>(drawn.size()), unit,
                    seconds, text.c_str());
      std::fflush(stdout);
    }
    return absl::OkStatus();
  };
  auto report_eval = [&](int64_t step) -> absl::Status {
    STEPC_ASSIGN_OR_RETURN(const Evaluation e, evaluator.Run(*session, *comm, data, schedule.seed));
    val_losses.push_back({step, e.loss});
    const std::string accuracy_json =
        e.has_accuracy ? absl::StrFormat(", \"val_accuracy\": %.6f", e.accuracy) : "";
    STEPC_RETURN_IF_ERROR(
        metrics.Write(absl::StrFormat("{\"step\": %d, \"val_loss\": %s%s, \"eval_batches\": %d}\n",
                                      step, Json(e.loss), accuracy_json, e.batches)));
    if (lead) {
      std::printf("eval %5lld/%lld | val_loss %.4f%s | %lld batches, %.2f s\n",
                  static_cast<long long>(step), static_cast<long long>(steps), e.loss,
                  e.has_accuracy ? absl::StrFormat(" | val_accuracy %.4f", e.accuracy).c_str() : "",
                  static_cast<long long>(e.batches), e.seconds);
      std::fflush(stdout);
    }
    return absl::OkStatus();
  };
  if (evaluator.enabled() && o.eval_every > 0 && first_step <= steps)
    STEPC_RETURN_IF_ERROR(report_eval(first_step - 1));
  // --plot: written when the run ends, and refreshed while it goes (after the
  // first step, so a killed run always leaves one, then at a progress line at
  // most every 10 s: each write redraws every step).
  auto last_plot = Clock::now();
  auto write_plot = [&]() -> absl::Status {
    if (!lead || o.plot.empty() || losses.empty()) return absl::OkStatus();
    last_plot = Clock::now();
    return WriteLossPlot(
        o.plot, LossPlot{losses, first_step, val_losses, o.plot_log,
                         absl::StrCat(std::filesystem::path(path).filename().string(), ": ",
                                      info.sharding, ", batch ", data.global_batch(), " x ",
                                      data.seq(), ", ", losses.size(), " steps")});
  };
  StepResult last;
  // For the end-of-run summary: each step's seconds and MFU, and the
  // seconds in collectives per axes mask.
  std::vector<double> step_seconds, step_mfu;
  // A CUDA step's device memory above the session's start, at its largest
  // after a step (where the device can tell).
  std::optional<int64_t> device_peak_bytes;
  std::map<int, std::vector<double>> comm_seconds;
  auto save_checkpoint = [&](int64_t step) -> absl::Status {
    const double saving = MonotonicSeconds();
    const json trainer = {
        {"trainer", "stepc-run"},
        {"schedule", ScheduleJson(schedule)},
        {"data", data.identity()},
        {"last", {{"loss", Json(last.loss)}, {"grad_norm", Json(last.grad_norm)}}}};
    STEPC_RETURN_IF_ERROR(SaveTrainingCheckpoint(*session, o, step, trainer, lead));
    trace.Host("checkpoint", step, saving, MonotonicSeconds());
    return absl::OkStatus();
  };
  // Caught while the steps run only: a signal during the final sample or
  // the writes after it ends the process as it always has.
  std::optional<InterruptGuard> interrupts;
  interrupts.emplace();
  for (int64_t step = first_step; step <= steps; ++step) {
    STEPC_RETURN_IF_ERROR(
        traced("data", step, [&] { return data.SetStep(*session, schedule.seed, step); }));
    // A loss that leaves targets out (SFT's prompts) averages over the
    // counted ones: the whole batch's count is logged beside the loss (tp
    // ranks hold the same rows: each data rank is counted once).
    std::optional<int64_t> counted = session->CountedTargets();
    if (counted && world > 1) {
      STEPC_ASSIGN_OR_RETURN(const std::vector<uint64_t> all,
                             comm->AllGather(static_cast<uint64_t>(*counted)));
      uint64_t sum = 0;
      for (uint64_t c : all) sum += c;
      counted = static_cast<int64_t>(sum / (world / data.data_world()));
    }
    const double lr = LearningRate(schedule, step);
    const auto start = Clock::now();
    comm->ResetTimes();
    comm->RecordCollectives(trace.Traces(step) && world > 1);
    STEPC_RETURN_IF_ERROR(traced("step", step, [&]() -> absl::Status {
      // (Inside the step's span: a CUDA step's kernels are placed from here.)
      if (trace.Traces(step)) trace.BeginStepKernels();
      STEPC_ASSIGN_OR_RETURN(last, session->Step(static_cast<float>(lr)));
      return absl::OkStatus();
    }));
    const double seconds = Since(start);
    if (const std::optional<int64_t> device = session->DeviceMemoryAboveBaseline())
      device_peak_bytes = std::max(device_peak_bytes.value_or(0), *device);
    for (int mask = 0; mask < kMaskCount; ++mask)
      if (comm->times().calls[mask] > 0) comm_seconds[mask].push_back(comm->times().seconds[mask]);
    if (trace.Traces(step)) STEPC_RETURN_IF_ERROR(trace.EndStepKernels(step));
    trace.Collectives(step, comm->TakeCollectiveRecords());
    losses.push_back(last.loss);
    // Throughput in what the model consumes: tokens for a language model,
    // samples (rows of the global batch) for any other.
    const bool lm = data.language_model();
    const double rate = (lm ? double(info.tokens_per_step) : double(data.samples_per_rank_step())) *
                        data.data_world() / seconds;
    const double gflops = double(info.model_flops_per_step) * world / seconds / 1e9;
    const double mfu = peak.gflops > 0 ? gflops / (peak.gflops * world) : 0;
    const bool finite = std::isfinite(last.loss) && std::isfinite(last.grad_norm);
    step_seconds.push_back(seconds);
    step_mfu.push_back(mfu);
    STEPC_RETURN_IF_ERROR(metrics.Write(absl::StrFormat(
        "{\"step\": %d, \"loss\": %s, \"lr\": %.6g, \"grad_norm\": %s, \"%s\": %.1f, "
        "\"gflops_per_s\": %.3f, \"planned_peak_bytes\": %d, \"measured_peak_bytes\": %d, "
        "\"baseline_bytes\": %d%s%s%s}\n",
        step, Json(last.loss), lr, Json(last.grad_norm), lm ? "tokens_per_s" : "samples_per_s",
        rate, gflops, session->planned_bytes(), ReadResidentMemory().peak_bytes, baseline_bytes,
        counted ? absl::StrFormat(", \"counted_targets\": %d", *counted) : "",
        peak.gflops > 0
            ? absl::StrFormat(", \"mfu\": %.6f, \"peak_gflops_per_s\": %.3f", mfu, peak.gflops)
            : "",
        finite ? "" : ", \"nonfinite\": true")));
    if (lead && (step % o.log_every == 0 || step == first_step || step == steps || !finite))
      std::printf("step %5lld/%lld | loss %.4f%s | lr %.2e | norm %.3f | %.0f %s | %.2f GFLOP/s%s\n",
                  static_cast<long long>(step), static_cast<long long>(steps), last.loss,
                  counted ? absl::StrFormat(" over %d targets", *counted).c_str() : "", lr,
                  last.grad_norm, rate, lm ? "tok/s" : "samples/s", gflops,
                  peak.gflops > 0 ? absl::StrFormat(" | MFU %.1f%%", 100 * mfu).c_str() : "");
    std::fflush(stdout);  // a killed run still shows how far it got
    if (step == first_step ||
        (step % o.log_every == 0 && Clock::now() - last_plot > std::chrono::seconds(10)))
      STEPC_RETURN_IF_ERROR(write_plot());
    // The metrics up to a failure are kept: they show how it diverged.
    if (!std::isfinite(last.loss))
      return absl::InternalError(absl::StrCat("the loss is ", last.loss, " at step ", step));
    if (evaluator.enabled() && ((o.eval_every > 0 && step % o.eval_every == 0) || step == steps))
      STEPC_RETURN_IF_ERROR(traced("eval", step, [&] { return report_eval(step); }));
    if (o.sample_every > 0 && step % o.sample_every == 0 && step != steps)
      STEPC_RETURN_IF_ERROR(traced("sample", step, [&] { return report_sample(step, false); }));
    const bool saves = ShouldSaveCheckpoint(o, step, steps);
    if (saves) STEPC_RETURN_IF_ERROR(save_checkpoint(step));
    // SIGTERM or SIGINT (a preempted or cancelled job): every rank stops
    // after the same step, with a checkpoint to resume from.
    int signal = StopSignal();
    if (world > 1) {
      STEPC_ASSIGN_OR_RETURN(const std::vector<uint64_t> all,
                             comm->AllGather(static_cast<uint64_t>(signal)));
      for (uint64_t s : all) signal = std::max(signal, static_cast<int>(s));
    }
    if (signal != 0 && step < steps) {
      if (!o.checkpoint_dir.empty() && !saves) STEPC_RETURN_IF_ERROR(save_checkpoint(step));
      STEPC_RETURN_IF_ERROR(write_plot());
      STEPC_RETURN_IF_ERROR(trace.Write());
      return absl::CancelledError(absl::StrFormat(
          "stopped by %s after step %d of %d%s", signal == SIGINT ? "SIGINT" : "SIGTERM", step,
          steps,
          o.checkpoint_dir.empty()
              ? " (no --checkpoint-dir: nothing saved to resume from)"
              : absl::StrCat("; checkpoint ", CheckpointDirForStep(o.checkpoint_dir, step),
                             ": the same command with --auto-resume (or --resume) continues")));
    }
  }
  interrupts.reset();
  STEPC_RETURN_IF_ERROR(trace.Write());
  // Each rank's median time in collectives per step (nanoseconds), for the
  // least over the ranks: the rank that arrives last at a collective waits
  // only for the transfer; the others also for it (rank imbalance).
  std::vector<uint64_t> rank_comm_ns;
  if (world > 1 && !step_seconds.empty() && !module->is_cuda()) {
    std::vector<double> mine(step_seconds.size(), 0.0);
    for (const auto& [mask, seconds] : comm_seconds)
      if (seconds.size() == mine.size())
        for (size_t k = 0; k < seconds.size(); ++k) mine[k] += seconds[k];
    if (mine.size() > 1) mine.erase(mine.begin());
    std::sort(mine.begin(), mine.end());
    STEPC_ASSIGN_OR_RETURN(rank_comm_ns,
                           comm->AllGather(static_cast<uint64_t>(1e9 * mine[mine.size() / 2])));
  }
  if (lead && !step_seconds.empty()) {
    // The first step of a run warms caches and primitives: the medians
    // leave it out when there are others.
    const size_t from = step_seconds.size() > 1 ? 1 : 0;
    auto median = [from](std::vector<double> v) {
      v.erase(v.begin(), v.begin() + std::min(from, v.size() - 1));
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    const double planned = double(session->planned_bytes());
    // The data the process grew by (what the plan and the workspace
    // predict); the libraries' code paged in meanwhile is shown apart.
    const ResidentMemory now = ReadResidentMemory();
    const double measured = double(DataPeakAbove(baseline, now) - probes_left_bytes);
    const double code = double(std::max<int64_t>(0, now.file_bytes - baseline.file_bytes));
    const double predicted_peak = double(predicted_peak_bytes);
    const double step_median = median(step_seconds);
    // The step's time in collectives per axes, and their sum, per step.
    std::map<std::string, double> comm_median;
    std::vector<double> comm_total(step_seconds.size(), 0.0);
    for (const auto& [mask, seconds] : comm_seconds) {
      comm_median[AxesName(mask)] = median(seconds);
      if (seconds.size() == comm_total.size())
        for (size_t k = 0; k < seconds.size(); ++k) comm_total[k] += seconds[k];
    }
    // A GPU's plan is device memory: compared with the device memory the
    // session added (cudaMemGetInfo), not the host's.
    const std::string memory_text =
        device_peak_bytes
            ? absl::StrFormat("memory per rank: planned %.1f MB on the device, measured %.1f MB "
                              "of device memory above the session's start (%.2fx)",
                              planned / 1e6, *device_peak_bytes / 1e6,
                              planned > 0 ? *device_peak_bytes / planned : 0.0)
            : absl::StrFormat("memory per rank: predicted %.1f MB (planned %.1f MB + libraries "
                              "%.1f MB), measured %.1f MB of data above the process baseline "
                              "(%.2fx; and %.1f MB of library code paged in)",
                              predicted_peak / 1e6, planned / 1e6, workspace.bytes() / 1e6,
                              measured / 1e6,
                              predicted_peak > 0 ? measured / predicted_peak : 0.0, code / 1e6);
    // Milliseconds with the digits a short (GPU) step needs.
    auto ms = [](double seconds) {
      return seconds >= 0.01 ? absl::StrFormat("%.1f ms", 1e3 * seconds)
                             : absl::StrFormat("%.3f ms", 1e3 * seconds);
    };
    std::printf("stepc-run: %zu steps | step time median %s (steps %lld-%lld)%s%s | %s\n",
                step_seconds.size(), ms(step_median).c_str(),
                static_cast<long long>(first_step + from), static_cast<long long>(steps),
                predicted.known ? absl::StrFormat(", predicted %s (%.2fx)",
                                                  ms(predicted.seconds),
                                                  step_median / predicted.seconds)
                                      .c_str()
                                : "",
                peak.gflops > 0
                    ? absl::StrFormat(" | MFU median %.1f%%", 100 * median(step_mfu)).c_str()
                    : "",
                memory_text.c_str());
    if (!comm_median.empty() && !module->is_cuda()) {
      std::string by_axes;
      for (const auto& [axes, seconds] : comm_median) {
        double want = -1;
        for (const AxisCommunication& a : comm_predicted.axes)
          if (a.axes == axes) want = a.predicted_seconds;
        absl::StrAppend(&by_axes, by_axes.empty() ? "" : ", ", axes, " ",
                        absl::StrFormat("%.1f ms", 1e3 * seconds),
                        want > 0 ? absl::StrFormat(" (predicted %.1f ms, %.2fx)", 1e3 * want,
                                                   seconds / want)
                                 : "");
      }
      std::printf("stepc-run: time in collectives per step, median: %.1f ms on rank 0 (%s)%s\n",
                  1e3 * median(comm_total), by_axes.c_str(),
                  rank_comm_ns.empty()
                      ? ""
                      : absl::StrFormat("; least of the ranks %.1f ms, most %.1f ms (the "
                                        "difference waits for slower ranks)",
                                        1e-6 * *std::min_element(rank_comm_ns.begin(),
                                                                 rank_comm_ns.end()),
                                        1e-6 * *std::max_element(rank_comm_ns.begin(),
                                                                 rank_comm_ns.end()))
                            .c_str());
    }
    // A pipeline's idle time: each rank's waits for transfers and
    // collectives over the step, against the schedule's prediction.
    json pipeline;
    if (info.pipeline_stages > 1 && !rank_comm_ns.empty() && step_median > 0 &&
        info.report_json) {
      const json report = json::parse(info.report_json, nullptr, /*allow_exceptions=*/false);
      if (report.is_object() && report.contains("pipeline") && report["pipeline"].is_object())
        pipeline = report["pipeline"];
      std::vector<double> idle;
      for (uint64_t ns : rank_comm_ns) idle.push_back(std::min(1.0, 1e-9 * ns / step_median));
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
    }
    if (!o.summary.empty()) {
      json summary = {
          {"steps", step_seconds.size()},
          {"measured_from_step", first_step + static_cast<int64_t>(from)},
          {"step_seconds_median", step_median},
          {"planned_peak_bytes", session->planned_bytes()},
          {"library_workspace_bytes", workspace.bytes()},
          {"predicted_peak_bytes", predicted_peak_bytes},
          {"measured_peak_bytes_above_baseline", now.peak_bytes - baseline_bytes},
          {"measured_data_peak_bytes_above_baseline", int64_t(measured)},
          {"measured_device_bytes_above_baseline", device_peak_bytes.value_or(-1)},
          {"rate_probes_left_bytes", probes_left_bytes},
          {"library_code_bytes_paged_in", int64_t(code)},
          {"memory_ratio", device_peak_bytes ? (planned > 0 ? *device_peak_bytes / planned : 0.0)
                           : predicted_peak > 0 ? measured / predicted_peak
                                                : 0.0},
          {"collective_seconds_median", median(comm_total)},
          {"collective_seconds_median_by_axes", comm_median},
      };
      if (!rank_comm_ns.empty()) {
        json per_rank = json::array();
        for (uint64_t ns : rank_comm_ns) per_rank.push_back(1e-9 * double(ns));
        summary["collective_seconds_median_by_rank"] = per_rank;
      }
      if (!pipeline.is_null()) summary["pipeline"] = pipeline;
      if (peak.gflops > 0) summary["mfu_median"] = median(step_mfu);
      if (predicted.known) {
        summary["predicted_step_seconds"] = predicted.seconds;
        summary["step_over_predicted"] = step_median / predicted.seconds;
        summary["predicted"] = {{"gemm_seconds", predicted.gemm_seconds},
                                {"attention_seconds", predicted.attention_seconds},
                                {"memory_bound_seconds", predicted.memory_seconds},
                                {"memory_bound_calls", predicted.memory_bound_calls},
                                {"kernel_call_seconds", predicted.kernel_call_seconds},
                                {"communication_seconds", predicted.comm_seconds}};
      }
      json by_axes = json::object();
      for (const AxisCommunication& a : comm_predicted.axes)
        by_axes[a.axes] = {{"seconds", a.predicted_seconds},
                           {"collectives", a.collectives},
                           {"wire_bytes", a.wire_bytes},
                           {"link_gbps", a.gbps},
                           {"latency_seconds", a.latency_seconds}};
      summary["predicted_collective_seconds_by_axes"] = by_axes;
      STEPC_RETURN_IF_ERROR(WriteSummary(o.summary, summary));
    }
  }
  if (lead && session->module().is_cuda())
    std::printf("stepc-run: device %s\n", session->DescribeDevice().c_str());
  std::fflush(stdout);
  STEPC_RETURN_IF_ERROR(write_plot());
  if (o.sample > 0) STEPC_RETURN_IF_ERROR(report_sample(steps, /*final=*/true));
  if (!o.save_outputs.empty()) STEPC_RETURN_IF_ERROR(SaveOutputs(*session, o.save_outputs, rank));
  if (!o.save_safetensors.empty())
    STEPC_RETURN_IF_ERROR(SaveSafetensors(*session, o.save_safetensors, lead));
  if (!o.save_npy.empty())
    STEPC_RETURN_IF_ERROR(SaveNpy(*session, o.save_npy, rank,
                                  trains ? std::optional<StepResult>(last) : std::nullopt));
  return absl::OkStatus();
}

}  // namespace stepc
