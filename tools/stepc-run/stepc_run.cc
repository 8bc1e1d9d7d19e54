// stepc-run: trains a compiled step.so.
//
//   stepc-run step.so [--data tokens.bin | --corpus FILE] [--steps N] [--lr X]
//       [--warmup K] [--seed S] [--log-every K] [--metrics FILE.jsonl]
//       [--plot FILE.svg] [--init-npy DIR] [--batch-npy DIR] [--save-npy DIR]
//       [--init-safetensors FILE] [--save-safetensors FILE]
//       [--checkpoint-dir DIR [--save-every K] [--keep N] [--auto-resume]]
//       [--resume DIR] [--val-data FILE | --val-fraction F | --val-batch-npy DIR]
//       [--eval-every K] [--eval-batches N] [--sample N --prompt TEXT
//       --temperature T --top-k K --vocab meta.json] [--save-outputs DIR]
//       [--threads N] [--plot-log]
//
// docs/training.md walks through them.
//
// With neither --data nor --corpus it trains on the embedded corpus
// (examples/data/sonnets.txt) under a character tokenizer.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "runtime/atomic_file.h"
#include "runtime/checkpoint.h"
#include "runtime/communicator.h"
#include "runtime/cpu_threads.h"
#include "runtime/data.h"
#include "runtime/npy.h"
#include "runtime/safetensors.h"
#include "runtime/session.h"
#include "runtime/status_macros.h"
#include "tools/stepc-run/loss_plot.h"
#include "tools/stepc-run/metrics_log.h"
#include "tools/stepc-run/npy_batches.h"
#include "tools/stepc-run/sampler.h"

ABSL_FLAG(std::string, data, "", "token file: flat uint16 (nanoGPT) or llm.c's .bin");
ABSL_FLAG(std::string, corpus, "", "text file, trained on under a character tokenizer");
ABSL_FLAG(int64_t, steps, 200, "training steps");
ABSL_FLAG(double, lr, 1e-3, "peak learning rate");
ABSL_FLAG(int64_t, warmup, 10, "linear warmup steps (then cosine decay)");
ABSL_FLAG(double, min_lr_ratio, 0.1, "final learning rate as a fraction of --lr");
ABSL_FLAG(uint64_t, seed, 0, "seed for parameters and batches");
ABSL_FLAG(int64_t, log_every, 10, "print a progress line every K steps");
ABSL_FLAG(std::string, metrics, "", "write one JSON line per step here");
ABSL_FLAG(std::string, plot, "", "write the loss curve here (SVG)");
ABSL_FLAG(bool, plot_log, false, "draw --plot's loss axis on a logarithmic scale");
ABSL_FLAG(std::string, init_npy, "", "load parameters from DIR/<name>.npy");
ABSL_FLAG(std::string, init_safetensors, "",
          "load parameters from a safetensors FILE by name (stepc.export's init.safetensors, "
          "or any file holding every parameter; other tensors are ignored)");
ABSL_FLAG(std::string, save_safetensors, "",
          "write the parameters after the last step to a safetensors FILE (F32, by name)");
ABSL_FLAG(std::string, batch_npy, "",
          "train on the model's inputs from .npy files: DIR/<input>.npy (one batch, every "
          "step), or DIR's subdirectories each holding one (a stream of batches, cycled)");
ABSL_FLAG(std::string, val_batch_npy, "",
          "validation batches as --batch-npy reads them, for --eval-every; classifiers also "
          "report val_accuracy");
ABSL_FLAG(std::string, save_outputs, "",
          "after the last step, evaluate its batch and write the loss, the logits and the loss "
          "function's outputs to DIR/<name>.npy (this rank's; other ranks DIR.rank<r>)");
ABSL_FLAG(std::string, save_npy, "",
          "write parameters, moments, loss and grad_norm after the last step to DIR");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "write checkpoints to DIR/step-NNNNNNNN (every --save-every steps and after the last)");
ABSL_FLAG(int64_t, save_every, 0, "checkpoint every K steps (0: only after the last)");
ABSL_FLAG(int64_t, keep, 0, "keep only the newest N checkpoints (0: all)");
ABSL_FLAG(bool, auto_resume, false,
          "resume from the newest checkpoint under --checkpoint-dir if there is one, else start "
          "afresh (a job that is requeued runs the same command again)");
ABSL_FLAG(std::string, resume, "",
          "continue from a checkpoint: DIR itself, or the newest DIR/step-NNNNNNNN; schedule "
          "flags not given default to the checkpoint's");
ABSL_FLAG(std::string, val_data, "", "validation token file (as --data) for --eval-every");
ABSL_FLAG(double, val_fraction, 0,
          "hold out the last fraction of the training tokens for validation (0: none)");
ABSL_FLAG(int64_t, eval_every, 0,
          "evaluate the validation loss before the first step, every K steps and after the "
          "last (0: only after the last, when there is validation data)");
ABSL_FLAG(int64_t, eval_batches, 10, "validation batches per evaluation (the same each time)");
ABSL_FLAG(int64_t, sample, 0,
          "after training, generate this many characters from --prompt (character "
          "vocabularies: --corpus or the embedded corpus)");
ABSL_FLAG(std::string, prompt, "\n", "the text --sample continues");
ABSL_FLAG(std::string, vocab, "",
          "the character vocabulary of --data token files, for --sample: "
          "scripts/prepare_data.py's meta.json");
ABSL_FLAG(double, temperature, 0.8, "sampling temperature (0: the most likely character)");
ABSL_FLAG(int64_t, top_k, 200, "sample among the k most likely characters (0: all)");
ABSL_FLAG(int32_t, threads, 0,
          "CPU threads per rank (0: OMP_NUM_THREADS if set, else the cores divided among the "
          "ranks on this node)");

namespace stepc {
namespace {

using json = nlohmann::json;

// The flags on the command line, by their Abseil names (main sets it).
absl::flat_hash_set<std::string> given_flags;

// What decides the learning rate and the batches of every step: from the
// flags, or from the checkpoint a run resumes.
struct Schedule {
  int64_t steps;
  double lr;
  int64_t warmup;
  double min_lr_ratio;
  uint64_t seed;
};

Schedule FlagSchedule() {
  return {absl::GetFlag(FLAGS_steps), absl::GetFlag(FLAGS_lr), absl::GetFlag(FLAGS_warmup),
          absl::GetFlag(FLAGS_min_lr_ratio), absl::GetFlag(FLAGS_seed)};
}

json ScheduleJson(const Schedule& s) {
  return {{"steps", s.steps}, {"lr", s.lr}, {"warmup", s.warmup},
          {"min_lr_ratio", s.min_lr_ratio}, {"seed", s.seed}};
}

// The schedule a resumed run follows: the checkpoint's, but for the flags
// given on the command line (a longer --steps extends a run). A given flag
// that differs from the checkpoint is said out loud: the run no longer
// repeats the one that wrote it.
absl::StatusOr<Schedule> ResumedSchedule(const json& trainer, const std::string& path,
                                         bool lead) {
  Schedule s = FlagSchedule();
  if (!trainer.contains("schedule") || !trainer["schedule"].is_object())
    return s;  // written by another trainer: the flags decide
  const json& saved = trainer["schedule"];
  // Each stored field is checked to be within what a run can mean (the file
  // is another program's as much as ours), used or not: the culprit is
  // named, not met later as a NaN loss.
  auto take = [&](const char* flag, auto& value, auto valid,
                  const char* expected) -> absl::Status {
    using T = std::decay_t<decltype(value)>;
    // An integer field must hold an integer of its sign (converting 1e300 or
    // -1 to one is undefined or wraps).
    const bool fits = !saved.contains(flag)          ? false
                      : std::is_floating_point_v<T> ? saved[flag].is_number()
                      : std::is_signed_v<T>         ? saved[flag].is_number_integer()
                                                    : saved[flag].is_number_unsigned();
    if (!fits)
      return absl::DataLossError(absl::StrCat("checkpoint '", path, "': its schedule lacks ",
                                              std::is_floating_point_v<T> ? "a numeric"
                                              : std::is_signed_v<T>       ? "an integer"
                                                                          : "a non-negative integer",
                                              " '", flag, "'"));
    const T stored = saved[flag].get<T>();
    if (!valid(stored))
      return absl::DataLossError(absl::StrCat("checkpoint '", path, "': its schedule's '", flag,
                                              "' is ", saved[flag].dump(), " (expected ",
                                              expected, ")"));
    if (!given_flags.contains(flag)) {
      value = stored;
    } else if (value != stored && lead) {
      std::fprintf(stderr, "stepc-run: note: --%s differs from the checkpoint's (%s): the "
                   "resumed run follows the flag\n", flag, saved[flag].dump().c_str());
    }
    return absl::OkStatus();
  };
  constexpr int64_t kMaxSteps = int64_t{1} << 40;
  STEPC_RETURN_IF_ERROR(take("steps", s.steps, [](int64_t v) { return v >= 1 && v <= kMaxSteps; },
                             "1 to 2^40"));
  STEPC_RETURN_IF_ERROR(take("lr", s.lr, [](double v) { return v >= 0 && v <= 1e4; },
                             "a learning rate from 0 to 10000"));
  STEPC_RETURN_IF_ERROR(take("warmup", s.warmup,
                             [](int64_t v) { return v >= 0 && v <= kMaxSteps; }, "0 to 2^40"));
  STEPC_RETURN_IF_ERROR(take("min_lr_ratio", s.min_lr_ratio,
                             [](double v) { return v >= 0 && v <= 1; }, "0 to 1"));
  STEPC_RETURN_IF_ERROR(take("seed", s.seed, [](uint64_t) { return true; }, "any"));
  return s;
}

// Warmup from 0 to lr over `warmup` steps, then cosine to lr·min_ratio.
double LearningRate(int64_t step, int64_t steps, int64_t warmup, double lr, double min_ratio) {
  if (warmup > 0 && step <= warmup) return lr * step / warmup;
  if (steps <= warmup) return lr;
  double progress = double(step - warmup) / double(steps - warmup);
  double cosine = 0.5 * (1.0 + std::cos(3.141592653589793 * progress));
  return lr * (min_ratio + (1.0 - min_ratio) * cosine);
}

// Peak resident memory of this process (VmHWM), in bytes.
int64_t MeasuredPeakBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return 0;
}

absl::StatusOr<npy::Array> ReadArray(const std::string& dir, const std::string& name) {
  npy::Array array;
  std::string error;
  if (!npy::Read(dir + "/" + name + ".npy", array, error)) return absl::NotFoundError(error);
  return array;
}

// Rows [rank·rows, (rank+1)·rows) of a [world·rows, seq] batch.
std::vector<int32_t> RankSlice(const std::vector<int32_t>& global, int rank, int64_t rows,
                               int64_t seq) {
  return std::vector<int32_t>(global.begin() + rank * rows * seq,
                              global.begin() + (rank + 1) * rows * seq);
}

absl::Status LoadParams(Session& session, const std::string& dir) {
  const stepc_module_info& info = session.module().info();
  for (int i = 0; i < info.num_args; ++i) {
    if (info.args[i].kind != STEPC_ARG_PARAM) continue;
    const std::string name = info.args[i].name;
    STEPC_ASSIGN_OR_RETURN(npy::Array array, ReadArray(dir, name));
    STEPC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, session.GlobalShape(name));
    if (array.shape != shape)
      return absl::InvalidArgumentError(absl::StrCat(
          "'", dir, "/", name, ".npy' has shape [", absl::StrJoin(array.shape, ", "),
          "]; parameter '", name, "' is [", absl::StrJoin(shape, ", "), "]"));
    for (size_t k = 0; k < array.data.size(); ++k)
      if (!std::isfinite(array.data[k]))
        return absl::InvalidArgumentError(absl::StrCat("'", dir, "/", name, ".npy' holds ",
                                                       array.data[k], " at element ", k));
    std::vector<float> values(array.data.begin(), array.data.end());
    STEPC_RETURN_IF_ERROR(session.WriteParam(name, values));
  }
  return absl::OkStatus();
}

absl::Status LoadSafetensors(Session& session, const std::string& path) {
  std::map<std::string, safetensors::Tensor> tensors;
  std::string error;
  if (!safetensors::Read(path, tensors, error)) return absl::NotFoundError(error);
  const stepc_module_info& info = session.module().info();
  for (int i = 0; i < info.num_args; ++i) {
    if (info.args[i].kind != STEPC_ARG_PARAM) continue;
    const std::string name = info.args[i].name;
    auto it = tensors.find(name);
    if (it == tensors.end())
      return absl::InvalidArgumentError(
          absl::StrCat("--init-safetensors '", path, "' has no tensor '", name, "'"));
    STEPC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, session.GlobalShape(name));
    if (it->second.shape != shape)
      return absl::InvalidArgumentError(absl::StrCat(
          "--init-safetensors '", path, "': '", name, "' has shape [",
          absl::StrJoin(it->second.shape, ", "), "]; the parameter is [",
          absl::StrJoin(shape, ", "), "]"));
    for (size_t k = 0; k < it->second.data.size(); ++k)
      if (!std::isfinite(it->second.data[k]))
        return absl::InvalidArgumentError(absl::StrCat("--init-safetensors '", path, "': '", name,
                                                       "' holds ", it->second.data[k],
                                                       " at element ", k));
    STEPC_RETURN_IF_ERROR(session.WriteParam(name, it->second.data));
  }
  return absl::OkStatus();
}

// Every rank reads (a sharded parameter is gathered); rank 0 writes.
absl::Status SaveSafetensors(const Session& session, const std::string& path, bool lead) {
  std::map<std::string, safetensors::Tensor> tensors;
  const stepc_module_info& info = session.module().info();
  for (int i = 0; i < info.num_args; ++i) {
    if (info.args[i].kind != STEPC_ARG_PARAM) continue;
    safetensors::Tensor& t = tensors[info.args[i].name];
    STEPC_ASSIGN_OR_RETURN(t.data, session.ReadParam(info.args[i].name));
    STEPC_ASSIGN_OR_RETURN(t.shape, session.GlobalShape(info.args[i].name));
  }
  std::string error;
  if (lead && !safetensors::Write(path, tensors, error))
    return absl::PermissionDeniedError(absl::StrCat("--save-safetensors: ", error));
  return absl::OkStatus();
}

absl::Status SaveState(const Session& session, const std::string& dir, StepResult last) {
  const stepc_module_info& info = session.module().info();
  std::string error;
  auto write = [&](const std::string& name, const std::vector<int64_t>& shape,
                   const std::vector<double>& data) -> absl::Status {
    if (!npy::Write(dir + "/" + name + ".npy", shape, data.data(), data.size(), npy::Dtype::kF4,
                    error))
      return absl::PermissionDeniedError(error);
    return absl::OkStatus();
  };
  for (int i = 0; i < info.num_args; ++i) {
    const stepc_arg_info& a = info.args[i];
    if (a.kind > STEPC_ARG_EXP_AVG_SQ) continue;
    STEPC_ASSIGN_OR_RETURN(std::vector<float> values, session.ReadParam(a.name));
    STEPC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, session.GlobalShape(a.name));
    std::string name = a.kind == STEPC_ARG_PARAM ? absl::StrCat("param.", a.name) : a.name;
    STEPC_RETURN_IF_ERROR(write(name, shape, std::vector<double>(values.begin(), values.end())));
  }
  STEPC_RETURN_IF_ERROR(write("loss", {}, {last.loss}));
  return write("grad_norm", {}, {last.grad_norm});
}

// The eval step on the inputs set: its loss, logits and the loss function's
// outputs as DIR/<name>.npy (rank r > 0 writes DIR.rank<r>).
absl::Status SaveOutputs(Session& session, std::string dir, int rank) {
  const stepc_module_info& info = session.module().info();
  std::vector<float> logits;
  std::vector<std::vector<float>> outputs;
  STEPC_ASSIGN_OR_RETURN(const float loss,
                         session.Eval(info.logits_rank > 0 ? &logits : nullptr, &outputs));
  if (rank > 0) dir = absl::StrCat(dir, ".rank", rank);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string error;
  auto write = [&](const std::string& name, std::vector<int64_t> shape,
                   const std::vector<float>& values) -> absl::Status {
    std::vector<double> data(values.begin(), values.end());
    if (!npy::Write(absl::StrCat(dir, "/", name, ".npy"), shape, data.data(), data.size(),
                    npy::Dtype::kF4, error))
      return absl::PermissionDeniedError(error);
    return absl::OkStatus();
  };
  STEPC_RETURN_IF_ERROR(write("loss", {}, {loss}));
  if (info.logits_rank > 0)
    STEPC_RETURN_IF_ERROR(write(
        "logits", std::vector<int64_t>(info.logits_shape, info.logits_shape + info.logits_rank),
        logits));
  for (int k = 0; k < info.num_outputs; ++k)
    STEPC_RETURN_IF_ERROR(write(info.outputs[k].name,
                                std::vector<int64_t>(info.outputs[k].shape,
                                                     info.outputs[k].shape + info.outputs[k].rank),
                                outputs[k]));
  return absl::OkStatus();
}

// Every flag is checked, and every output's directory, before anything is
// loaded or written: a bad invocation changes no file.
absl::Status ValidateFlags() {
  if (absl::GetFlag(FLAGS_steps) < 1)
    return absl::InvalidArgumentError("--steps must be at least 1");
  if (absl::GetFlag(FLAGS_log_every) < 1)
    return absl::InvalidArgumentError("--log-every must be at least 1");
  if (!(absl::GetFlag(FLAGS_lr) >= 0) || !std::isfinite(absl::GetFlag(FLAGS_lr)) ||
      absl::GetFlag(FLAGS_warmup) < 0 ||
      !(absl::GetFlag(FLAGS_min_lr_ratio) >= 0 && absl::GetFlag(FLAGS_min_lr_ratio) <= 1))
    return absl::InvalidArgumentError(
        "--lr must be finite and >= 0, --warmup >= 0 and --min-lr-ratio in [0, 1]");
  int sources = !absl::GetFlag(FLAGS_data).empty() + !absl::GetFlag(FLAGS_corpus).empty() +
                !absl::GetFlag(FLAGS_batch_npy).empty();
  if (sources > 1)
    return absl::InvalidArgumentError("give at most one of --data, --corpus and --batch-npy");
  std::error_code ec;
  for (const auto& [flag, path] : {std::pair<const char*, std::string>{"--metrics",
                                                                      absl::GetFlag(FLAGS_metrics)},
                                   {"--plot", absl::GetFlag(FLAGS_plot)},
                                   {"--save-safetensors", absl::GetFlag(FLAGS_save_safetensors)}}) {
    if (path.empty()) continue;
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (std::filesystem::is_directory(path, ec))
      return absl::InvalidArgumentError(absl::StrCat(flag, " '", path, "' is a directory"));
    const std::filesystem::file_status status = std::filesystem::status(path, ec);
    if (std::filesystem::is_fifo(status) || std::filesystem::is_socket(status))
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write '", path, "': it is a FIFO or socket (it would block)"));
    if (!parent.empty() && !std::filesystem::is_directory(parent, ec))
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " '", path, "': no directory '", parent.string(), "'"));
  }
  for (const auto& [flag, dir] :
       {std::pair<const char*, std::string>{"--save-npy", absl::GetFlag(FLAGS_save_npy)},
        {"--checkpoint-dir", absl::GetFlag(FLAGS_checkpoint_dir)},
       {"--save-outputs", absl::GetFlag(FLAGS_save_outputs)}}) {
    if (dir.empty()) continue;
    // Its nearest existing ancestor must be a directory.
    std::filesystem::path at = std::filesystem::absolute(dir, ec);
    while (!at.empty() && !std::filesystem::exists(at, ec) && at != at.parent_path())
      at = at.parent_path();
    if (!std::filesystem::is_directory(at, ec))
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " '", dir, "': '", at.string(), "' is not a directory"));
  }
  if (absl::GetFlag(FLAGS_save_every) < 0 || absl::GetFlag(FLAGS_keep) < 0)
    return absl::InvalidArgumentError("--save-every and --keep must be >= 0");
  if (absl::GetFlag(FLAGS_save_every) > 0 && absl::GetFlag(FLAGS_checkpoint_dir).empty())
    return absl::InvalidArgumentError("--save-every needs --checkpoint-dir");
  if (absl::GetFlag(FLAGS_auto_resume) && absl::GetFlag(FLAGS_checkpoint_dir).empty())
    return absl::InvalidArgumentError("--auto-resume needs --checkpoint-dir");
  if (absl::GetFlag(FLAGS_threads) < 0 || absl::GetFlag(FLAGS_threads) > 4096)
    return absl::InvalidArgumentError("--threads must be in [0, 4096]");
  if (absl::GetFlag(FLAGS_eval_every) < 0 || absl::GetFlag(FLAGS_eval_batches) < 1)
    return absl::InvalidArgumentError("--eval-every must be >= 0 and --eval-batches >= 1");
  if (!(absl::GetFlag(FLAGS_val_fraction) >= 0 && absl::GetFlag(FLAGS_val_fraction) < 1))
    return absl::InvalidArgumentError("--val-fraction must be in [0, 1)");
  if ((absl::GetFlag(FLAGS_val_fraction) > 0 || !absl::GetFlag(FLAGS_val_data).empty()) &&
      !absl::GetFlag(FLAGS_batch_npy).empty())
    return absl::InvalidArgumentError(
        "--val-data and --val-fraction need token data (--data, --corpus or the embedded "
        "corpus), not --batch-npy");
  const int val_sources = (absl::GetFlag(FLAGS_val_fraction) > 0) +
                          !absl::GetFlag(FLAGS_val_data).empty() +
                          !absl::GetFlag(FLAGS_val_batch_npy).empty();
  if (val_sources > 1)
    return absl::InvalidArgumentError(
        "give one of --val-data, --val-fraction and --val-batch-npy");
  if (absl::GetFlag(FLAGS_eval_every) > 0 && val_sources == 0)
    return absl::InvalidArgumentError(
        "--eval-every needs --val-data, --val-fraction or --val-batch-npy");
  if (absl::GetFlag(FLAGS_sample) < 0 || absl::GetFlag(FLAGS_top_k) < 0 ||
      !(absl::GetFlag(FLAGS_temperature) >= 0) || !std::isfinite(absl::GetFlag(FLAGS_temperature)))
    return absl::InvalidArgumentError(
        "--sample and --top-k must be >= 0 and --temperature finite and >= 0");
  if (absl::GetFlag(FLAGS_sample) > 0 && absl::GetFlag(FLAGS_prompt).empty())
    return absl::InvalidArgumentError("--prompt is empty: sampling continues some text");
  if (!absl::GetFlag(FLAGS_resume).empty() + !absl::GetFlag(FLAGS_init_npy).empty() +
          !absl::GetFlag(FLAGS_init_safetensors).empty() > 1)
    return absl::InvalidArgumentError(
        "give one of --resume, --init-npy and --init-safetensors (a checkpoint holds the "
        "parameters)");
  return absl::OkStatus();
}

// Under MPI every rank must train the same run: a rank with other flags or
// data would wait forever in a collective, or silently diverge. Each flag
// that changes what the ranks do together or what they compute is compared
// on its own, so a difference names the flag (and both values, for numbers).
absl::Status AgreeOnRun(Communicator& comm, const Schedule& schedule, const TokenData& data,
                        const std::string& batch_dir, const std::string& resume_dir) {
  auto text_hash = [](const std::string& text) {
    uint64_t hash = 0xCBF29CE484222325ull;
    for (unsigned char c : text) hash = (hash ^ c) * 0x100000001B3ull;
    return hash;
  };
  auto bits = [](double v) {
    uint64_t b;
    std::memcpy(&b, &v, sizeof(b));
    return b;
  };
  uint64_t tokens = 0xCBF29CE484222325ull;
  tokens = (tokens ^ static_cast<uint64_t>(data.size())) * 0x100000001B3ull;
  for (int64_t i = 0; i < data.size(); i += std::max<int64_t>(1, data.size() / 4096))
    tokens = (tokens ^ static_cast<uint64_t>(data.token(i))) * 0x100000001B3ull;
  // (flag, its value as 64 bits, whether those bits are the number itself
  // (an integer, or a double's bits) rather than a text's hash)
  struct Entry {
    const char* flag;
    uint64_t value;
    enum { kInt, kDouble, kText } kind;
  };
  const std::vector<Entry> entries = {
      {"--steps", static_cast<uint64_t>(schedule.steps), Entry::kInt},
      {"--warmup", static_cast<uint64_t>(schedule.warmup), Entry::kInt},
      {"--seed", schedule.seed, Entry::kInt},
      {"--lr", bits(schedule.lr), Entry::kDouble},
      {"--min-lr-ratio", bits(schedule.min_lr_ratio), Entry::kDouble},
      {"--init-npy", text_hash(absl::GetFlag(FLAGS_init_npy)), Entry::kText},
      {"--init-safetensors", text_hash(absl::GetFlag(FLAGS_init_safetensors)), Entry::kText},
      {"--save-safetensors", text_hash(absl::GetFlag(FLAGS_save_safetensors)), Entry::kText},
      {"--resume", text_hash(resume_dir), Entry::kText},
      {"--checkpoint-dir", text_hash(absl::GetFlag(FLAGS_checkpoint_dir)), Entry::kText},
      {"--save-every", static_cast<uint64_t>(absl::GetFlag(FLAGS_save_every)), Entry::kInt},
      {"--batch-npy", text_hash(batch_dir), Entry::kText},
      {"--val-data", text_hash(absl::GetFlag(FLAGS_val_data)), Entry::kText},
      {"--val-batch-npy", text_hash(absl::GetFlag(FLAGS_val_batch_npy)), Entry::kText},
      {"--val-fraction", bits(absl::GetFlag(FLAGS_val_fraction)), Entry::kDouble},
      {"--eval-every", static_cast<uint64_t>(absl::GetFlag(FLAGS_eval_every)), Entry::kInt},
      {"--eval-batches", static_cast<uint64_t>(absl::GetFlag(FLAGS_eval_batches)), Entry::kInt},
      {"--sample", static_cast<uint64_t>(absl::GetFlag(FLAGS_sample)), Entry::kInt},
      {"--prompt", text_hash(absl::GetFlag(FLAGS_prompt)), Entry::kText},
      {"--temperature", bits(absl::GetFlag(FLAGS_temperature)), Entry::kDouble},
      {"--top-k", static_cast<uint64_t>(absl::GetFlag(FLAGS_top_k)), Entry::kInt},
      {"--save-outputs", text_hash(absl::GetFlag(FLAGS_save_outputs)), Entry::kText},
      {"the training tokens (--data, --corpus)", tokens, Entry::kText},
  };
  for (const Entry& e : entries) {
    STEPC_ASSIGN_OR_RETURN(const std::vector<uint64_t> all, comm.AllGather(e.value));
    for (size_t r = 0; r < all.size(); ++r) {
      if (all[r] == e.value) continue;
      std::string values;
      if (e.kind == Entry::kInt) {
        values = absl::StrCat(": ", static_cast<int64_t>(all[r]), " there, ",
                              static_cast<int64_t>(e.value), " here");
      } else if (e.kind == Entry::kDouble) {
        double there, here;
        std::memcpy(&there, &all[r], sizeof(there));
        std::memcpy(&here, &e.value, sizeof(here));
        values = absl::StrCat(": ", there, " there, ", here, " here");
      } else {
        values = " (it differs)";
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", r, " was started with other training flags or data than rank ", comm.rank(),
          ": ", e.flag, values, "; every rank must be given the same"));
    }
  }
  return absl::OkStatus();
}

// A JSON number, or null for what JSON cannot hold (NaN, infinities).
std::string Json(double v) { return std::isfinite(v) ? absl::StrFormat("%.6f", v) : "null"; }

// The character vocabulary of scripts/prepare_data.py's meta.json: the
// byte of each id, in id order.
absl::StatusOr<std::string> ReadVocabulary(const std::string& path, int64_t model_vocab) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))  // a FIFO would block
    return absl::NotFoundError(absl::StrCat("--vocab '", path, "' is missing or not a regular file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open --vocab '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  const json meta = json::parse(text.str(), nullptr, false);
  if (meta.is_discarded() || !meta.is_object() || !meta.contains("vocabulary") ||
      !meta["vocabulary"].is_array())
    return absl::InvalidArgumentError(absl::StrCat(
        "--vocab '", path, "' has no \"vocabulary\" list (scripts/prepare_data.py "
        "--tokenizer char writes one)"));
  std::string vocabulary;
  for (const json& b : meta["vocabulary"]) {
    if (!b.is_number_integer() || b.get<int64_t>() < 0 || b.get<int64_t>() > 255)
      return absl::InvalidArgumentError(
          absl::StrCat("--vocab '", path, "': the vocabulary lists bytes 0..255, got ", b.dump()));
    vocabulary.push_back(static_cast<char>(b.get<int>()));
  }
  if (static_cast<int64_t>(vocabulary.size()) > model_vocab)
    return absl::InvalidArgumentError(absl::StrCat("--vocab '", path, "' has ", vocabulary.size(),
                                                   " characters; the model's vocabulary is ",
                                                   model_vocab));
  return vocabulary;
}

// What the checkpoint records of the data: its identity, and the
// character vocabulary (so a resumed run or a sampler decodes the same ids).
json DataJson(const std::string& source, int64_t size, const char* unit, uint64_t fingerprint,
              const std::string& characters) {
  // Another split trains on other tokens.
  const double fraction = absl::GetFlag(FLAGS_val_fraction);
  uint64_t bits;  // the value's bits: the same fingerprint on any host
  std::memcpy(&bits, &fraction, sizeof(bits));
  fingerprint = (fingerprint ^ bits) * 0x100000001B3ull;
  std::vector<int> vocabulary;
  for (unsigned char c : characters) vocabulary.push_back(c);
  return {{"source", source}, {"tokens", size}, {"unit", unit}, {"val_fraction", fraction},
          {"fingerprint", absl::StrFormat("%016x", fingerprint)}, {"vocabulary", vocabulary}};
}

// "batch B x T" of a language model's global batch, else every input's
// global shape.
std::string BatchText(const stepc_module_info& info, int world) {
  std::vector<std::string> parts;
  for (int i = 0; i < info.num_args; ++i) {
    const stepc_arg_info& a = info.args[i];
    if (a.kind != STEPC_ARG_INPUT) continue;
    std::vector<int64_t> shape(a.shape, a.shape + a.rank);
    if (!shape.empty()) shape[0] *= world;
    if (std::string(a.name) == "tokens" && a.rank == 2)
      return absl::StrCat("batch ", shape[0], " x ", shape[1]);
    parts.push_back(absl::StrCat(a.name, " [", absl::StrJoin(shape, ", "), "]"));
  }
  return absl::StrCat("inputs ", absl::StrJoin(parts, ", "));
}

// The names of the step's inputs, for messages.
std::string InputNames(const stepc_module_info& info) {
  std::vector<std::string> names;
  for (int i = 0; i < info.num_args; ++i)
    if (info.args[i].kind == STEPC_ARG_INPUT) names.push_back(absl::StrCat("'", info.args[i].name, "'"));
  return absl::StrJoin(names, ", ");
}

// The fraction of rows whose most likely class is their label, given this
// rank's logits [rows, classes] and labels; `correct` and `rows` are added to.
void CountCorrect(const std::vector<float>& logits, const std::vector<int32_t>& labels,
                  int64_t& correct, int64_t& rows) {
  const size_t classes = logits.size() / labels.size();
  for (size_t r = 0; r < labels.size(); ++r) {
    const float* row = logits.data() + r * classes;
    correct += std::max_element(row, row + classes) - row == labels[r];
    ++rows;
  }
}

absl::Status Run(const std::string& path, std::shared_ptr<Communicator> comm) {
  STEPC_RETURN_IF_ERROR(ValidateFlags());
  // Before step.so brings the OpenMP runtime: --threads, else an explicit
  // OMP_NUM_THREADS, else the cores divided among this node's ranks.
  const int threads = absl::GetFlag(FLAGS_threads) > 0 ? absl::GetFlag(FLAGS_threads)
                      : std::getenv("OMP_NUM_THREADS") ? 0
                                                       : DefaultCpuThreads();
  if (threads > 0) UseCpuThreads(threads);
  const std::string shown_threads = threads > 0 ? std::to_string(threads)
                                                : std::string(std::getenv("OMP_NUM_THREADS"));
  STEPC_ASSIGN_OR_RETURN(std::unique_ptr<Module> loaded, Module::Load(path));
  std::shared_ptr<const Module> module(std::move(loaded));
  const stepc_module_info& info = module->info();
  // The process before the session holds anything: what measured_peak_bytes
  // is compared with the plan above.
  const int64_t baseline_bytes = MeasuredPeakBytes();
  STEPC_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(module, comm));
  const int rank = comm->rank(), world = comm->size();
  const bool lead = rank == 0;
  // The ranks of a tp group (consecutive: tp is the innermost mesh axis)
  // compute on the same rows: the batch is split over the data ranks.
  const int tp = std::max(1, info.tensor_parallel);
  const int data_rank = rank / tp, data_world = world / tp;

  // A resumed run takes its schedule (and seed, hence its batches) from the
  // checkpoint; its tensors are loaded once the data is known to match.
  Schedule schedule = FlagSchedule();
  std::string resume_dir;
  CheckpointInfo resumed;
  json resumed_trainer;
  std::string resume_from = absl::GetFlag(FLAGS_resume);
  if (resume_from.empty() && absl::GetFlag(FLAGS_auto_resume) &&
      FindLatestCheckpoint(absl::GetFlag(FLAGS_checkpoint_dir)).ok())
    resume_from = absl::GetFlag(FLAGS_checkpoint_dir);
  if (!resume_from.empty()) {
    STEPC_ASSIGN_OR_RETURN(resume_dir, FindLatestCheckpoint(resume_from));
    STEPC_ASSIGN_OR_RETURN(resumed, ReadCheckpointInfo(resume_dir));
    resumed_trainer = json::parse(resumed.trainer_json, nullptr, false);
    STEPC_ASSIGN_OR_RETURN(schedule, ResumedSchedule(resumed_trainer, resume_dir, lead));
  }
  STEPC_RETURN_IF_ERROR(session->InitParams(schedule.seed));
  if (!absl::GetFlag(FLAGS_init_npy).empty())
    STEPC_RETURN_IF_ERROR(LoadParams(*session, absl::GetFlag(FLAGS_init_npy)));
  if (!absl::GetFlag(FLAGS_init_safetensors).empty())
    STEPC_RETURN_IF_ERROR(LoadSafetensors(*session, absl::GetFlag(FLAGS_init_safetensors)));

  // Token data feeds a language model's [batch, seq] 'tokens' and
  // 'targets'; --batch-npy any model's inputs, by name.
  const std::string batch_dir = absl::GetFlag(FLAGS_batch_npy);
  const int tokens_arg = module->FindArg("tokens"), targets_arg = module->FindArg("targets");
  const bool language_model = tokens_arg >= 0 && targets_arg >= 0 &&
                              info.args[tokens_arg].kind == STEPC_ARG_INPUT &&
                              info.args[tokens_arg].rank == 2;
  // A rank's rows per step (the leading dimension of the first input).
  int64_t samples_per_rank_step = 1;
  for (int i = 0; i < info.num_args; ++i)
    if (info.args[i].kind == STEPC_ARG_INPUT) {
      samples_per_rank_step = info.args[i].rank >= 1 ? info.args[i].shape[0] : 1;
      break;
    }
  if (batch_dir.empty() && !language_model)
    return absl::InvalidArgumentError(absl::StrCat(
        "the model's inputs are ", InputNames(info), "; token data feeds [batch, seq] "
        "'tokens' and 'targets': give this model's inputs with --batch-npy DIR"));
  // Each data rank computes on `batch` rows of the global batch of
  // data_world·batch.
  int64_t batch = 1, seq = 1, vocab = 0;
  if (language_model) {
    batch = info.args[tokens_arg].shape[0];
    seq = info.args[tokens_arg].shape[1];
    vocab = info.args[tokens_arg].id_bound;
  }
  const int64_t global_batch = batch * data_world;

  std::vector<int32_t> tokens, targets;
  TokenData data;
  std::optional<NpyBatches> batches;
  // Resumed with no step left to train, no data named and nothing to
  // evaluate (e.g. only --sample): no training data is read; the
  // checkpoint's vocabulary decodes samples.
  const bool no_data = !resume_dir.empty() && language_model && schedule.steps <= resumed.step &&
                       !given_flags.contains("data") && !given_flags.contains("corpus") &&
                       !given_flags.contains("batch_npy") &&
                       absl::GetFlag(FLAGS_val_fraction) == 0 &&
                       absl::GetFlag(FLAGS_val_data).empty() &&
                       absl::GetFlag(FLAGS_val_batch_npy).empty();
  if (no_data) {
    data = TokenData::FromText("", "no data (nothing to train)");
  } else if (!batch_dir.empty()) {
    STEPC_ASSIGN_OR_RETURN(NpyBatches opened, NpyBatches::Open(batch_dir, *module, data_rank, data_world));
    batches = std::move(opened);
  } else {
    if (!absl::GetFlag(FLAGS_data).empty()) {
      STEPC_ASSIGN_OR_RETURN(data, TokenData::FromTokenFile(absl::GetFlag(FLAGS_data)));
    } else if (!absl::GetFlag(FLAGS_corpus).empty()) {
      const std::string corpus = absl::GetFlag(FLAGS_corpus);
      std::error_code ec;
      if (!std::filesystem::is_regular_file(corpus, ec))
        return absl::NotFoundError(absl::StrCat(
            "corpus '", corpus, "' ",
            std::filesystem::exists(corpus, ec) ? "is not a regular file" : "does not exist"));
      if (std::filesystem::file_size(corpus, ec) > kMaxTokenFileBytes / 2)
        return absl::InvalidArgumentError(absl::StrCat("corpus '", corpus, "' is larger than ",
                                                       kMaxTokenFileBytes / 2, " bytes"));
      std::ifstream in(corpus, std::ios::binary);
      if (!in) return absl::NotFoundError(absl::StrCat("cannot open corpus '", corpus, "'"));
      data = TokenData::FromText(std::string(std::istreambuf_iterator<char>(in), {}), corpus);
    } else {
      data = TokenData::FromText(EmbeddedCorpus(), "the embedded corpus");
    }
    STEPC_RETURN_IF_ERROR(data.Validate(vocab, global_batch, seq));
  }
  // The character vocabulary: the corpus's, or a token file's --vocab.
  std::string characters = data.vocabulary();
  if (!absl::GetFlag(FLAGS_vocab).empty()) {
    STEPC_ASSIGN_OR_RETURN(characters, ReadVocabulary(absl::GetFlag(FLAGS_vocab), vocab));
  }
  const json data_json =
      batches ? DataJson(batch_dir, batches->count(), "batches", batches->Fingerprint(), "")
              : DataJson(data.source(), data.size(), "tokens", data.Fingerprint(), characters);
  if (world > 1) STEPC_RETURN_IF_ERROR(AgreeOnRun(*comm, schedule, data, batch_dir, resume_dir));
  // Validation data: a held-out tail of the training tokens, or a file.
  TokenData val;
  std::optional<NpyBatches> val_batches;
  if (!absl::GetFlag(FLAGS_val_batch_npy).empty()) {
    STEPC_ASSIGN_OR_RETURN(NpyBatches opened,
                           NpyBatches::Open(absl::GetFlag(FLAGS_val_batch_npy), *module, data_rank,
                                            data_world));
    val_batches = std::move(opened);
  }
  const bool validate = absl::GetFlag(FLAGS_val_fraction) > 0 ||
                        !absl::GetFlag(FLAGS_val_data).empty() || val_batches.has_value();
  if (absl::GetFlag(FLAGS_val_fraction) > 0) {
    val = data.HoldOut(absl::GetFlag(FLAGS_val_fraction));
    STEPC_RETURN_IF_ERROR(data.Validate(vocab, global_batch, seq));
  } else if (!absl::GetFlag(FLAGS_val_data).empty()) {
    STEPC_ASSIGN_OR_RETURN(val, TokenData::FromTokenFile(absl::GetFlag(FLAGS_val_data)));
  }
  if (validate && !val_batches) STEPC_RETURN_IF_ERROR(val.Validate(vocab, global_batch, seq));
  // A classifier's accuracy: its logits [rows, classes] against the integer
  // input the cross-entropy reads, named 'labels' or 'targets'.
  int labels_arg = module->FindArg("labels");
  if (labels_arg < 0) labels_arg = targets_arg;
  const bool accuracy = val_batches && info.logits_rank == 2 && labels_arg >= 0 &&
                        info.args[labels_arg].rank == 1 &&
                        info.args[labels_arg].shape[0] == info.logits_shape[0];
  // The mean loss of the same --eval-batches validation batches each time.
  const int64_t eval_every = absl::GetFlag(FLAGS_eval_every);
  double val_accuracy = 0;
  auto evaluate = [&]() -> absl::StatusOr<double> {
    std::vector<int32_t> val_tokens, val_targets;
    double sum = 0;
    if (val_batches) {
      const int64_t n = std::min(absl::GetFlag(FLAGS_eval_batches), val_batches->count());
      int64_t correct = 0, rows = 0;
      std::vector<float> logits;
      for (int64_t j = 0; j < n; ++j) {
        STEPC_ASSIGN_OR_RETURN(const InputBatch b, val_batches->Load(j));
        STEPC_RETURN_IF_ERROR(SetBatch(*session, b));
        STEPC_ASSIGN_OR_RETURN(const float loss, session->Eval(accuracy ? &logits : nullptr));
        sum += loss;
        if (accuracy)
          for (size_t k = 0; k < b.names.size(); ++k)
            if (b.names[k] == info.args[labels_arg].name) CountCorrect(logits, b.ints[k], correct, rows);
      }
      if (accuracy) {
        // Every rank's count: the accuracy over the global batches.
        STEPC_ASSIGN_OR_RETURN(const std::vector<uint64_t> all_correct,
                               comm->AllGather(static_cast<uint64_t>(correct)));
        uint64_t total = 0;
        for (uint64_t c : all_correct) total += c;
        val_accuracy = double(total) / double(rows * world);
      }
      return sum / static_cast<double>(n);
    }
    const int64_t batches = absl::GetFlag(FLAGS_eval_batches);
    for (int64_t j = 1; j <= batches; ++j) {
      val.Sample(schedule.seed ^ 0x5EEDull, j, global_batch, seq, val_tokens, val_targets);
      if (world > 1) {
        val_tokens = RankSlice(val_tokens, data_rank, batch, seq);
        val_targets = RankSlice(val_targets, data_rank, batch, seq);
      }
      STEPC_RETURN_IF_ERROR(session->SetInput("tokens", val_tokens));
      STEPC_RETURN_IF_ERROR(session->SetInput("targets", val_targets));
      STEPC_ASSIGN_OR_RETURN(const float loss, session->Eval());
      sum += loss;
    }
    return sum / static_cast<double>(batches);
  };

  int64_t first_step = 1;
  if (!resume_dir.empty()) {
    // Other data would make the resumed run another run: refuse it. (The
    // trainer state is another program's file: every field is checked.)
    if (!no_data && resumed_trainer.is_object() && resumed_trainer.contains("data")) {
      const json& saved = resumed_trainer["data"];
      if (!saved.is_object() || !saved.contains("fingerprint") ||
          !saved["fingerprint"].is_string() || !saved.contains("source") ||
          !saved["source"].is_string() || !saved.contains("tokens") ||
          !saved["tokens"].is_number_integer())
        return absl::DataLossError(absl::StrCat(
            "checkpoint '", resume_dir,
            "': its trainer state's \"data\" lacks a string fingerprint or source or an "
            "integer token count"));
      if (saved["fingerprint"] != data_json["fingerprint"]) {
        // Each side as it differs: the source and size, or (the same data)
        // the validation split, or (the same names) the contents.
        const bool same_source = saved["source"] == data_json["source"] &&
                                 saved["tokens"] == data_json["tokens"];
        const bool split_known = saved.contains("val_fraction") && saved["val_fraction"].is_number();
        const bool other_split = same_source && split_known &&
                                 saved["val_fraction"] != data_json["val_fraction"];
        auto describe = [&](const json& d) {
          const json unit = d.value("unit", json("tokens"));
          std::string text = absl::StrCat(d["source"].get<std::string>(), " (",
                                          d["tokens"].get<int64_t>(), " ",
                                          unit.is_string() ? unit.get<std::string>() : "tokens");
          if (other_split) absl::StrAppend(&text, ", --val-fraction ", d["val_fraction"].dump());
          return text + ")";
        };
        return absl::FailedPreconditionError(absl::StrCat(
            "checkpoint '", resume_dir, "' was trained on ", describe(saved), "; this run reads ",
            describe(data_json),
            other_split   ? ": resume with the same --val-fraction"
            : same_source ? ", whose contents differ (fingerprint " +
                                data_json["fingerprint"].get<std::string>() + ", the checkpoint's " +
                                saved["fingerprint"].get<std::string>() +
                                "): resume with the data it was trained on"
                          : ": resume with the same --data, --corpus or --batch-npy"));
      }
    }
    STEPC_RETURN_IF_ERROR(session->LoadCheckpoint(resume_dir).status());
    first_step = session->steps_done() + 1;
    // Another compilation of the model (other optimizer hyperparameters,
    // precision, remat) continues the state, but not the same run.
    // (The sharding may differ: checkpoints reshard.)
    auto unsharded = [](std::string options) {
      const size_t at = options.find(" shard=");
      if (at != std::string::npos)
        options.erase(at, options.find_first_of(" }", at + 1) - at);
      return options;
    };
    const std::string options = CompileOptions(info);
    if (lead && !resumed.compile_options.empty() && !options.empty() &&
        unsharded(resumed.compile_options) != unsharded(options))
      std::fprintf(stderr,
                   "stepc-run: note: checkpoint '%s' was written by a step compiled with %s; "
                   "this step.so was compiled with %s: the resumed run continues its state "
                   "under other options\n",
                   resume_dir.c_str(), resumed.compile_options.c_str(), options.c_str());
    if (lead)
      std::printf("stepc-run: resumed %s at step %lld (written by %s, %d rank%s)\n",
                  resume_dir.c_str(), static_cast<long long>(session->steps_done()),
                  resumed.sharding.c_str(), resumed.world_size, resumed.world_size > 1 ? "s" : "");
  }

  const int64_t steps = schedule.steps, log_every = absl::GetFlag(FLAGS_log_every);
  const int64_t warmup = schedule.warmup;
  const std::string checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  const int64_t save_every = absl::GetFlag(FLAGS_save_every);
  // Streamed: a line per step, flushed, appended to on resume (rank 0).
  MetricsLog metrics(lead ? absl::GetFlag(FLAGS_metrics) : "", first_step);
  std::string error;
  // (Only a --warmup asked for: the default outlasting a short test run is
  // not news.)
  if (lead && warmup > steps && given_flags.contains("warmup"))
    std::fprintf(stderr,
                 "stepc-run: warning: --warmup %lld is longer than --steps %lld: the learning "
                 "rate only reaches %.3g of --lr\n",
                 static_cast<long long>(warmup), static_cast<long long>(steps),
                 double(steps) / double(warmup));
  if (lead)
    std::printf("stepc-run: %s | planned %.1f MB | %s | %s | %lld steps%s%s\n",
                path.c_str(), session->planned_bytes() / 1e6, BatchText(info, data_world).c_str(),
                batches ? absl::StrCat(batch_dir, " (", batches->count(), " batch",
                                       batches->count() > 1 ? "es" : "", ")").c_str()
                        : data.source().c_str(),
                static_cast<long long>(steps),
                world > 1 ? absl::StrCat(" | ", world, " ranks (", info.sharding, ")").c_str()
                          : "",
                module->is_cuda() ? "" : absl::StrCat(" | ", shown_threads, " threads").c_str());
  if (lead && first_step > steps)
    std::printf("stepc-run: the checkpoint is at step %lld of %lld: nothing left to train\n",
                static_cast<long long>(first_step - 1), static_cast<long long>(steps));
  std::vector<float> losses;
  std::vector<std::pair<int64_t, double>> val_losses;
  StepResult last;
  auto report_eval = [&](int64_t step) -> absl::Status {
    auto start = std::chrono::steady_clock::now();
    STEPC_ASSIGN_OR_RETURN(const double val_loss, evaluate());
    val_losses.push_back({step, val_loss});
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const int64_t eval_batches =
        val_batches ? std::min(absl::GetFlag(FLAGS_eval_batches), val_batches->count())
                    : absl::GetFlag(FLAGS_eval_batches);
    const std::string accuracy_json =
        accuracy ? absl::StrFormat(", \"val_accuracy\": %.6f", val_accuracy) : "";
    STEPC_RETURN_IF_ERROR(metrics.Write(absl::StrFormat(
        "{\"step\": %d, \"val_loss\": %s%s, \"eval_batches\": %d}\n", step, Json(val_loss),
        accuracy_json, eval_batches)));
    if (lead) {
      std::printf("eval %5lld/%lld | val_loss %.4f%s | %lld batches, %.2f s\n",
                  static_cast<long long>(step), static_cast<long long>(steps), val_loss,
                  accuracy ? absl::StrFormat(" | val_accuracy %.4f", val_accuracy).c_str() : "",
                  static_cast<long long>(eval_batches), seconds);
      std::fflush(stdout);
    }
    return absl::OkStatus();
  };
  if (validate && eval_every > 0 && first_step <= steps)
    STEPC_RETURN_IF_ERROR(report_eval(first_step - 1));
  // --plot: written when the run ends, and refreshed while it goes (at a
  // progress line, at most every 10 s: each write redraws every step).
  auto last_plot = std::chrono::steady_clock::now();
  auto write_plot = [&]() -> absl::Status {
    if (!lead || absl::GetFlag(FLAGS_plot).empty() || losses.empty()) return absl::OkStatus();
    last_plot = std::chrono::steady_clock::now();
    return WriteLossPlot(
        absl::GetFlag(FLAGS_plot),
        LossPlot{losses, first_step, val_losses, absl::GetFlag(FLAGS_plot_log),
                 absl::StrCat(std::filesystem::path(path).filename().string(), ": ",
                              info.sharding, ", batch ", global_batch, " x ", seq, ", ",
                              losses.size(), " steps")});
  };
  for (int64_t step = first_step; step <= steps; ++step) {
    if (batches) {
      STEPC_ASSIGN_OR_RETURN(const InputBatch b, batches->Load(step - 1));
      STEPC_RETURN_IF_ERROR(SetBatch(*session, b));
    } else {
      // The global batch of this step, the same on every rank; keep our rows.
      data.Sample(schedule.seed, step, global_batch, seq, tokens, targets);
      if (world > 1) {
        tokens = RankSlice(tokens, data_rank, batch, seq);
        targets = RankSlice(targets, data_rank, batch, seq);
      }
      STEPC_RETURN_IF_ERROR(session->SetInput("tokens", tokens));
      STEPC_RETURN_IF_ERROR(session->SetInput("targets", targets));
    }
    double lr = LearningRate(step, steps, warmup, schedule.lr, schedule.min_lr_ratio);
    auto start = std::chrono::steady_clock::now();
    STEPC_ASSIGN_OR_RETURN(last, session->Step(static_cast<float>(lr)));
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    losses.push_back(last.loss);
    // Throughput in what the model consumes: tokens for a language model,
    // samples (rows of the global batch) for any other.
    const double rate =
        (language_model ? double(info.tokens_per_step) : double(samples_per_rank_step)) *
        data_world / seconds;
    const char* rate_key = language_model ? "tokens_per_s" : "samples_per_s";
    const char* rate_unit = language_model ? "tok/s" : "samples/s";
    double gflops = double(info.model_flops_per_step) * world / seconds / 1e9;
    const bool finite = std::isfinite(last.loss) && std::isfinite(last.grad_norm);
    STEPC_RETURN_IF_ERROR(metrics.Write(absl::StrFormat(
        "{\"step\": %d, \"loss\": %s, \"lr\": %.6g, \"grad_norm\": %s, "
        "\"%s\": %.1f, \"gflops_per_s\": %.3f, \"planned_peak_bytes\": %d, "
        "\"measured_peak_bytes\": %d, \"baseline_bytes\": %d%s}\n",
        step, Json(last.loss), lr, Json(last.grad_norm), rate_key, rate, gflops,
        session->planned_bytes(), MeasuredPeakBytes(), baseline_bytes,
        finite ? "" : ", \"nonfinite\": true")));
    if (lead && (step % log_every == 0 || step == first_step || step == steps || !finite))
      std::printf("step %5lld/%lld | loss %.4f | lr %.2e | norm %.3f | %.0f %s | %.2f GFLOP/s\n",
                  static_cast<long long>(step), static_cast<long long>(steps), last.loss, lr,
                  last.grad_norm, rate, rate_unit, gflops);
    std::fflush(stdout);  // a killed run still shows how far it got
    if (step % log_every == 0 &&
        std::chrono::steady_clock::now() - last_plot > std::chrono::seconds(10))
      STEPC_RETURN_IF_ERROR(write_plot());
    if (!std::isfinite(last.loss)) {
      // The metrics up to the failure are kept: they show how it diverged.
      return absl::InternalError(absl::StrCat("the loss is ", last.loss, " at step ", step));
    }
    if (validate && ((eval_every > 0 && step % eval_every == 0) || step == steps))
      STEPC_RETURN_IF_ERROR(report_eval(step));
    if (!checkpoint_dir.empty() && ((save_every > 0 && step % save_every == 0) || step == steps)) {
      auto saving = std::chrono::steady_clock::now();
      const std::string dir = CheckpointDirForStep(checkpoint_dir, step);
      const json trainer = {{"trainer", "stepc-run"},
                            {"schedule", ScheduleJson(schedule)},
                            {"data", data_json},
                            {"last", {{"loss", Json(last.loss)}, {"grad_norm", Json(last.grad_norm)}}}};
      STEPC_RETURN_IF_ERROR(session->SaveCheckpoint(dir, trainer.dump()));
      if (lead && absl::GetFlag(FLAGS_keep) > 0)
        STEPC_RETURN_IF_ERROR(
            PruneCheckpoints(checkpoint_dir, dir, absl::GetFlag(FLAGS_keep)));
      if (lead)
        std::printf("stepc-run: checkpoint %s (%.2f s)\n", dir.c_str(),
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - saving)
                        .count());
    }
  }
  if (lead && session->module().is_cuda())
    std::printf("stepc-run: device %s\n", session->DescribeDevice().c_str());
  std::fflush(stdout);
  STEPC_RETURN_IF_ERROR(write_plot());
  if (absl::GetFlag(FLAGS_sample) > 0) {
    // The character vocabulary (byte vocabulary[i] is id i): the data's,
    // else the one the checkpoint saved.
    std::string vocabulary = characters;
    if (vocabulary.empty() && resumed_trainer.is_object() && resumed_trainer.contains("data") &&
        resumed_trainer["data"].contains("vocabulary") &&
        resumed_trainer["data"]["vocabulary"].is_array())
      for (const json& b : resumed_trainer["data"]["vocabulary"])
        if (b.is_number_integer()) vocabulary.push_back(static_cast<char>(b.get<int>()));
    if (vocabulary.empty())
      return absl::FailedPreconditionError(
          "--sample decodes characters: train on --corpus or the embedded corpus, or give "
          "the token file's --vocab (scripts/prepare_data.py's meta.json)");
    std::vector<int32_t> prompt;
    for (char c : absl::GetFlag(FLAGS_prompt)) {
      size_t id = vocabulary.find(c);
      if (id == std::string::npos)
        return absl::InvalidArgumentError(absl::StrCat(
            "--prompt holds '", std::string(1, c), "' (byte ", static_cast<unsigned char>(c),
            "), which is not in the model's character vocabulary of ", vocabulary.size()));
      prompt.push_back(static_cast<int32_t>(id));
    }
    SampleOptions options;
    options.tokens = absl::GetFlag(FLAGS_sample);
    options.temperature = absl::GetFlag(FLAGS_temperature);
    options.top_k = absl::GetFlag(FLAGS_top_k);
    options.seed = schedule.seed;
    // Never an id past the vocabulary (a model's may be padded larger).
    options.vocabulary = static_cast<int64_t>(vocabulary.size());
    auto start = std::chrono::steady_clock::now();
    STEPC_ASSIGN_OR_RETURN(const std::vector<int32_t> ids, Generate(*session, prompt, options));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (lead) {
      std::string text = absl::GetFlag(FLAGS_prompt);
      for (int32_t id : ids) text.push_back(vocabulary[id]);
      std::printf("stepc-run: sample of %lld characters (temperature %g, top-k %lld, %.1f "
                  "tokens/s):\n%s\n",
                  static_cast<long long>(ids.size()), options.temperature,
                  static_cast<long long>(options.top_k), ids.size() / seconds, text.c_str());
      std::fflush(stdout);
    }
  }
  if (!absl::GetFlag(FLAGS_save_outputs).empty())
    STEPC_RETURN_IF_ERROR(SaveOutputs(*session, absl::GetFlag(FLAGS_save_outputs), rank));
  if (!absl::GetFlag(FLAGS_save_safetensors).empty())
    STEPC_RETURN_IF_ERROR(SaveSafetensors(*session, absl::GetFlag(FLAGS_save_safetensors), lead));
  if (!absl::GetFlag(FLAGS_save_npy).empty()) {
    // Rank 0 writes DIR; other ranks DIR.rank<r> (replicas, for checks).
    std::string dir = absl::GetFlag(FLAGS_save_npy);
    if (!lead) dir = absl::StrCat(dir, ".rank", rank);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec || !std::filesystem::is_directory(dir, ec))
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create the --save-npy directory '", dir, "'"));
    STEPC_RETURN_IF_ERROR(SaveState(*session, dir, last));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace stepc

namespace stepc {
namespace {

// The flags by what they are for; one missing from every group is listed
// under "other" (so none is ever hidden).
void PrintHelp() {
  static const std::pair<const char*, std::vector<const char*>> kGroups[] = {
      {"data", {"data", "corpus", "batch_npy", "val_data", "val_fraction", "val_batch_npy",
                "vocab"}},
      {"schedule", {"steps", "lr", "warmup", "min_lr_ratio", "seed"}},
      {"parameters in and out", {"init_npy", "init_safetensors", "save_npy", "save_safetensors"}},
      {"checkpoints", {"checkpoint_dir", "save_every", "keep", "resume", "auto_resume"}},
      {"evaluation and sampling", {"eval_every", "eval_batches", "save_outputs", "sample",
                                   "prompt", "temperature", "top_k"}},
      {"progress and logs", {"log_every", "metrics", "plot", "plot_log"}},
      {"machine", {"threads"}},
  };
  auto all = absl::GetAllFlags();
  std::map<std::string, absl::CommandLineFlag*> ours;
  for (auto& [name, flag] : all)
    if (absl::EndsWith(flag->Filename(), "stepc_run.cc")) ours[std::string(name)] = flag;
  auto print = [](const absl::CommandLineFlag& flag) {
    std::string name = std::string(flag.Name());
    std::replace(name.begin(), name.end(), '_', '-');
    std::string def = flag.DefaultValue();
    if (def == "\n") def = "\\n";
    std::string head = absl::StrCat("  --", name, def.empty() ? "" : absl::StrCat(" (", def, ")"));
    // The help text wrapped at 80 columns, indented under the flag.
    std::string line = "      ";
    std::printf("%s\n", head.c_str());
    for (absl::string_view word : absl::StrSplit(flag.Help(), ' ', absl::SkipEmpty())) {
      if (line.size() + word.size() + 1 > 80 && line.size() > 6) {
        std::printf("%s\n", line.c_str());
        line = "      ";
      }
      absl::StrAppend(&line, line.size() > 6 ? " " : "", word);
    }
    if (line.size() > 6) std::printf("%s\n", line.c_str());
  };
  std::printf("usage: stepc-run step.so [flags]: train a compiled step (docs/runtime.md)\n");
  for (const auto& [group, names] : kGroups) {
    std::printf("\n%s:\n", group);
    for (const char* name : names)
      if (auto it = ours.find(name); it != ours.end()) {
        print(*it->second);
        ours.erase(it);
      }
  }
  if (!ours.empty()) {
    std::printf("\nother:\n");
    for (auto& [name, flag] : ours) print(*flag);
  }
}

}  // namespace
}  // namespace stepc

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("stepc-run step.so [flags]: train a compiled step");
  // --help: the flags grouped by what they are for, spelled as the docs
  // spell them (asking for help is not an error).
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h" ||
        std::string_view(argv[i]) == "--helpfull" || std::string_view(argv[i]) == "--helpshort") {
      stepc::PrintHelp();
      return 0;
    }
  // Under mpirun/srun, ranks come from MPI; otherwise this is a world of one.
  absl::StatusOr<bool> mpi = stepc::MpiInitIfLaunched(&argc, &argv);
  if (!mpi.ok()) {
    std::fprintf(stderr, "stepc-run: error: %s\n", std::string(mpi.status().message()).c_str());
    return 1;
  }
  // Flags are spelled with dashes (--log-every); Abseil names them with
  // underscores.
  std::vector<std::string> spelled(argv, argv + argc);
  std::vector<char*> args;
  for (std::string& arg : spelled) {
    if (arg.rfind("--", 0) == 0) {
      size_t i = 2;
      for (; i < arg.size() && arg[i] != '='; ++i)
        if (arg[i] == '-') arg[i] = '_';
      stepc::given_flags.insert(arg.substr(2, i - 2));
    }
    args.push_back(arg.data());
  }
  std::vector<char*> positional = absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  if (positional.size() != 2) {
    std::fprintf(stderr, "stepc-run: error: expects one step.so (see --help)\n");
    return 2;
  }
  std::shared_ptr<stepc::Communicator> comm;
  if (*mpi) {
    absl::StatusOr<std::unique_ptr<stepc::Communicator>> world = stepc::MakeMpiWorldCommunicator();
    if (!world.ok()) {
      std::fprintf(stderr, "stepc-run: error: %s\n", std::string(world.status().message()).c_str());
      stepc::MpiAbort(1);
    }
    comm = std::move(*world);
  } else {
    comm = stepc::MakeLocalCommunicator();
  }
  // Nothing thrown below (a std::bad_alloc, a filesystem error) escapes as
  // an abort: it is an error like any other.
  absl::Status status;
  try {
    status = stepc::Run(positional[1], comm);
  } catch (const std::exception& e) {
    status = absl::InternalError(absl::StrCat("unexpected failure: ", e.what()));
  }
  if (!status.ok()) {
    if (comm->size() > 1) {
      std::fprintf(stderr, "stepc-run: rank %d: error: %s\n", comm->rank(),
                   std::string(status.message()).c_str());
      std::fflush(stderr);
      stepc::MpiAbort(1);  // the other ranks must not wait in a collective
    }
    std::fprintf(stderr, "stepc-run: error: %s\n", std::string(status.message()).c_str());
    comm.reset();
    if (*mpi) stepc::MpiFinalize();
    return 1;
  }
  comm.reset();  // its sub-communicators go before MPI does
  if (*mpi) stepc::MpiFinalize();
  return 0;
}
