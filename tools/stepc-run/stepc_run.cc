// stepc-run: trains a compiled step.so.
//
//   stepc-run step.so [--data tokens.bin | --corpus FILE] [--steps N] [--lr X]
//       [--warmup K] [--seed S] [--log-every K] [--metrics FILE.jsonl]
//       [--plot FILE.svg] [--init-npy DIR] [--batch-npy DIR] [--save-npy DIR]
//
// With neither --data nor --corpus it trains on the embedded corpus
// (examples/data/sonnets.txt) under a character tokenizer.

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/flags/internal/program_name.h"
#include "absl/flags/internal/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"
#include "runtime/atomic_file.h"
#include "runtime/communicator.h"
#include "runtime/data.h"
#include "runtime/npy.h"
#include "runtime/session.h"
#include "runtime/status_macros.h"
#include "tools/stepc-run/loss_plot.h"

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
ABSL_FLAG(std::string, init_npy, "", "load parameters from DIR/<name>.npy");
ABSL_FLAG(std::string, batch_npy, "", "train on DIR/tokens.npy, DIR/targets.npy every step");
ABSL_FLAG(std::string, save_npy, "",
          "write parameters, moments, loss and grad_norm after the last step to DIR");

namespace stepc {
namespace {

// Whether --warmup was on the command line (main sets it).
bool warmup_given = false;

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

// Token ids from an integer .npy of exactly `rows` x `seq` (or, under
// sharding, the global batch of which this rank takes its rows).
absl::StatusOr<std::vector<int32_t>> ReadIds(const std::string& dir, const std::string& name,
                                             int64_t rows, int64_t seq, int rank, int world) {
  STEPC_ASSIGN_OR_RETURN(npy::Array array, ReadArray(dir, name));
  const std::string path = absl::StrCat(dir, "/", name, ".npy");
  if (array.dtype[0] == 'f')
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' holds floats (", array.dtype, "); token ids must be an integer array"));
  const std::vector<int64_t> local = {rows, seq}, global = {rows * world, seq};
  if (array.shape != local && array.shape != global)
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' has shape [", absl::StrJoin(array.shape, ", "), "]; the step takes [",
        rows * world, ", ", seq, "]", world > 1 ? absl::StrCat(" (or this rank's [", rows, ", ",
                                                               seq, "])")
                                               : ""));
  std::vector<int32_t> ids;
  ids.reserve(array.data.size());
  for (double v : array.data) {
    if (v < 0 || v > INT32_MAX)
      return absl::InvalidArgumentError(
          absl::StrCat("'", path, "' holds the token id ", v, " (ids are >= 0)"));
    ids.push_back(static_cast<int32_t>(v));
  }
  if (array.shape == global && world > 1) ids = RankSlice(ids, rank, rows, seq);
  return ids;
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
                                   {"--plot", absl::GetFlag(FLAGS_plot)}}) {
    if (path.empty()) continue;
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (std::filesystem::is_directory(path, ec))
      return absl::InvalidArgumentError(absl::StrCat(flag, " '", path, "' is a directory"));
    if (!parent.empty() && !std::filesystem::is_directory(parent, ec))
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " '", path, "': no directory '", parent.string(), "'"));
  }
  const std::string save = absl::GetFlag(FLAGS_save_npy);
  if (!save.empty()) {
    // Its nearest existing ancestor must be a directory.
    std::filesystem::path at = std::filesystem::absolute(save, ec);
    while (!at.empty() && !std::filesystem::exists(at, ec) && at != at.parent_path())
      at = at.parent_path();
    if (!std::filesystem::is_directory(at, ec))
      return absl::InvalidArgumentError(absl::StrCat(
          "--save-npy '", save, "': '", at.string(), "' is not a directory"));
  }
  return absl::OkStatus();
}

// Under MPI every rank must train the same run: a rank with other flags or
// data would wait forever in a collective, or silently diverge.
absl::Status AgreeOnRun(Communicator& comm, const TokenData& data, const std::string& batch_dir) {
  uint64_t hash = 0xCBF29CE484222325ull;
  auto mix = [&hash](uint64_t v) { hash = (hash ^ v) * 0x100000001B3ull; };
  auto mix_text = [&](const std::string& text) {
    for (unsigned char c : text) mix(c);
    mix(0xFF);
  };
  mix(static_cast<uint64_t>(absl::GetFlag(FLAGS_steps)));
  mix(static_cast<uint64_t>(absl::GetFlag(FLAGS_warmup)));
  mix(absl::GetFlag(FLAGS_seed));
  mix_text(absl::StrCat(absl::GetFlag(FLAGS_lr), "/", absl::GetFlag(FLAGS_min_lr_ratio)));
  mix_text(absl::GetFlag(FLAGS_init_npy));
  mix_text(batch_dir);
  mix(static_cast<uint64_t>(data.size()));
  for (int64_t i = 0; i < data.size(); i += std::max<int64_t>(1, data.size() / 4096))
    mix(static_cast<uint64_t>(data.token(i)));
  STEPC_ASSIGN_OR_RETURN(const std::vector<uint64_t> all, comm.AllGather(hash));
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r] != hash)
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", r, " was started with other training flags or data than rank ", comm.rank(),
          " (--steps, --warmup, --lr, --min-lr-ratio, --seed, --init-npy, --batch-npy and the "
          "tokens must agree)"));
  return absl::OkStatus();
}

// A JSON number, or null for what JSON cannot hold (NaN, infinities).
std::string Json(double v) { return std::isfinite(v) ? absl::StrFormat("%.6f", v) : "null"; }

absl::Status Run(const std::string& path, std::shared_ptr<Communicator> comm) {
  STEPC_RETURN_IF_ERROR(ValidateFlags());
  STEPC_ASSIGN_OR_RETURN(std::unique_ptr<Module> loaded, Module::Load(path));
  std::shared_ptr<const Module> module(std::move(loaded));
  const stepc_module_info& info = module->info();
  // The process before the session holds anything: what measured_peak_bytes
  // is compared with the plan above.
  const int64_t baseline_bytes = MeasuredPeakBytes();
  STEPC_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(module, comm));
  const int rank = comm->rank(), world = comm->size();
  const bool lead = rank == 0;
  STEPC_RETURN_IF_ERROR(session->InitParams(absl::GetFlag(FLAGS_seed)));
  if (!absl::GetFlag(FLAGS_init_npy).empty())
    STEPC_RETURN_IF_ERROR(LoadParams(*session, absl::GetFlag(FLAGS_init_npy)));

  STEPC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, session->Shape("tokens"));
  if (shape.size() != 2)
    return absl::InvalidArgumentError("the model's 'tokens' input is not [batch, seq]");
  // Each rank computes on `batch` rows of the global batch of world·batch.
  const int64_t batch = shape[0], seq = shape[1], global_batch = batch * world;
  const int64_t vocab = info.args[module->FindArg("tokens")].id_bound;

  std::vector<int32_t> tokens, targets;
  TokenData data;
  const std::string batch_dir = absl::GetFlag(FLAGS_batch_npy);
  if (!batch_dir.empty()) {
    STEPC_ASSIGN_OR_RETURN(tokens, ReadIds(batch_dir, "tokens", batch, seq, rank, world));
    STEPC_ASSIGN_OR_RETURN(targets, ReadIds(batch_dir, "targets", batch, seq, rank, world));
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
  if (world > 1) STEPC_RETURN_IF_ERROR(AgreeOnRun(*comm, data, batch_dir));

  const int64_t steps = absl::GetFlag(FLAGS_steps), log_every = absl::GetFlag(FLAGS_log_every);
  const int64_t warmup = absl::GetFlag(FLAGS_warmup);
  AtomicFile metrics;
  std::string error;
  if (lead && !absl::GetFlag(FLAGS_metrics).empty() &&
      !metrics.Open(absl::GetFlag(FLAGS_metrics), error))
    return absl::PermissionDeniedError(error);
  // (Only a --warmup asked for: the default outlasting a short test run is
  // not news.)
  if (lead && warmup > steps && warmup_given)
    std::fprintf(stderr,
                 "stepc-run: warning: --warmup %lld is longer than --steps %lld: the learning "
                 "rate only reaches %.3g of --lr\n",
                 static_cast<long long>(warmup), static_cast<long long>(steps),
                 double(steps) / double(warmup));
  if (lead)
    std::printf("stepc-run: %s | planned %.1f MB | batch %lld x %lld | %s | %lld steps%s\n",
                path.c_str(), session->planned_bytes() / 1e6,
                static_cast<long long>(global_batch), static_cast<long long>(seq),
                batch_dir.empty() ? data.source().c_str() : batch_dir.c_str(),
                static_cast<long long>(steps),
                world > 1 ? absl::StrCat(" | ", world, " ranks (", info.sharding, ")").c_str()
                          : "");
  std::vector<float> losses;
  StepResult last;
  for (int64_t step = 1; step <= steps; ++step) {
    if (batch_dir.empty()) {
      // The global batch of this step, the same on every rank; keep our rows.
      data.Sample(absl::GetFlag(FLAGS_seed), step, global_batch, seq, tokens, targets);
      if (world > 1) {
        tokens = RankSlice(tokens, rank, batch, seq);
        targets = RankSlice(targets, rank, batch, seq);
      }
    }
    STEPC_RETURN_IF_ERROR(session->SetInput("tokens", tokens));
    STEPC_RETURN_IF_ERROR(session->SetInput("targets", targets));
    double lr = LearningRate(step, steps, warmup, absl::GetFlag(FLAGS_lr),
                             absl::GetFlag(FLAGS_min_lr_ratio));
    auto start = std::chrono::steady_clock::now();
    STEPC_ASSIGN_OR_RETURN(last, session->Step(static_cast<float>(lr)));
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    losses.push_back(last.loss);
    double tokens_per_s = double(info.tokens_per_step) * world / seconds;
    double gflops = double(info.model_flops_per_step) * world / seconds / 1e9;
    const bool finite = std::isfinite(last.loss) && std::isfinite(last.grad_norm);
    if (metrics.is_open())
      metrics.stream() << absl::StrFormat(
          "{\"step\": %d, \"loss\": %s, \"lr\": %.6g, \"grad_norm\": %s, "
          "\"tokens_per_s\": %.1f, \"gflops_per_s\": %.3f, \"planned_peak_bytes\": %d, "
          "\"measured_peak_bytes\": %d, \"baseline_bytes\": %d%s}\n",
          step, Json(last.loss), lr, Json(last.grad_norm), tokens_per_s, gflops,
          session->planned_bytes(), MeasuredPeakBytes(), baseline_bytes,
          finite ? "" : ", \"nonfinite\": true");
    if (lead && (step % log_every == 0 || step == 1 || step == steps || !finite))
      std::printf("step %5lld/%lld | loss %.4f | lr %.2e | norm %.3f | %.0f tok/s | %.2f GFLOP/s\n",
                  static_cast<long long>(step), static_cast<long long>(steps), last.loss, lr,
                  last.grad_norm, tokens_per_s, gflops);
    if (!std::isfinite(last.loss)) {
      // The metrics up to the failure are kept: they show how it diverged.
      if (metrics.is_open() && !metrics.Commit(error))
        return absl::DataLossError(error);
      return absl::InternalError(absl::StrCat("the loss is ", last.loss, " at step ", step));
    }
  }
  if (lead && session->module().is_cuda())
    std::printf("stepc-run: device %s\n", session->DescribeDevice().c_str());
  std::fflush(stdout);
  if (metrics.is_open() && !metrics.Commit(error)) return absl::DataLossError(error);
  if (lead && !absl::GetFlag(FLAGS_plot).empty())
    STEPC_RETURN_IF_ERROR(WriteLossPlot(absl::GetFlag(FLAGS_plot), losses,
                                        absl::StrCat("stepc-run ", path)));
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

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("stepc-run step.so [flags]: train a compiled step");
  // --help lists this file's flags (Abseil would look for a file named after
  // the program, stepc-run, and find none).
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::EndsWith(file, "stepc_run.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  // Abseil (20220623) exits 1 after --help; asking for help is not an error.
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
      absl::flags_internal::SetProgramInvocationName(argv[0]);
      absl::flags_internal::FlagsHelp(std::cout, "stepc_run.",
                                      absl::flags_internal::HelpFormat::kHumanReadable,
                                      absl::ProgramUsageMessage());
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
    if (arg.rfind("--warmup", 0) == 0) stepc::warmup_given = true;
    if (arg.rfind("--", 0) == 0)
      for (size_t i = 2; i < arg.size() && arg[i] != '='; ++i)
        if (arg[i] == '-') arg[i] = '_';
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
