// stepc-run: trains a compiled step.so.
//
//   stepc-run step.so [--data tokens.bin | --corpus FILE] [--steps N] [--lr X]
//       [--warmup K] [--seed S] [--log-every K] [--metrics FILE.jsonl] [--summary FILE.json]
//       [--plot FILE.svg] [--init-npy DIR] [--batch-npy DIR] [--save-npy DIR]
//       [--init-safetensors FILE] [--save-safetensors FILE]
//       [--checkpoint-dir DIR [--save-every K] [--keep N] [--auto-resume]]
//       [--resume DIR] [--val-data FILE | --val-fraction F | --val-batch-npy DIR]
//       [--eval-every K] [--eval-batches N] [--sample N --prompt TEXT
//       --temperature T --top-k K --vocab meta.json|tokenizer.bin] [--save-outputs DIR]
//       [--threads N] [--plot-log] [--trace FILE.json [--trace-steps A:B]]
//       [--peak-tflops T]
//
// docs/training.md walks through them. The job itself is the runtime's
// (runtime/train/trainer.h): this file is its flags, help and main.
//
// With neither --data nor --corpus it trains on the embedded corpus
// (examples/data/sonnets.txt) under a character tokenizer.

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/interrupt.h"
#include "runtime/train/options.h"
#include "runtime/train/trainer.h"

// One flag per training option (runtime/train/train_options.def).
#define STEPC_TRAIN_OPTION(group, type, name, byDefault, help) \
  ABSL_FLAG(type, name, byDefault, help);
#include "runtime/train/train_options.def"
#undef STEPC_TRAIN_OPTION

namespace stepc {
namespace {

// The flags as the training job's options.
TrainOptions OptionsFromFlags(absl::flat_hash_set<std::string> given) {
  TrainOptions o;
#define STEPC_TRAIN_OPTION(group, type, name, byDefault, help) o.name = absl::GetFlag(FLAGS_##name);
#include "runtime/train/train_options.def"
#undef STEPC_TRAIN_OPTION
  o.given = std::move(given);
  return o;
}

// The flags by what they are for (each option's group in the table).
void PrintHelp() {
  // Each option under its group, in the table's order.
  std::vector<std::pair<std::string, std::vector<const char*>>> groups;
  auto add = [&](const char* group, const char* name) {
    if (groups.empty() || groups.back().first != group) groups.push_back({group, {}});
    groups.back().second.push_back(name);
  };
#define STEPC_TRAIN_OPTION(group, type, name, byDefault, help) add(group, #name);
#include "runtime/train/train_options.def"
#undef STEPC_TRAIN_OPTION
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
  for (const auto& [group, names] : groups) {
    std::printf("\n%s:\n", group.c_str());
    for (const char* name : names) print(*absl::FindCommandLineFlag(name));
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
  absl::flat_hash_set<std::string> given;
  std::vector<char*> args;
  for (std::string& arg : spelled) {
    if (arg.rfind("--", 0) == 0) {
      size_t i = 2;
      for (; i < arg.size() && arg[i] != '='; ++i)
        if (arg[i] == '-') arg[i] = '_';
      given.insert(arg.substr(2, i - 2));
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
    status = stepc::RunTrainingJob(positional[1], stepc::OptionsFromFlags(std::move(given)),
                                   comm);
  } catch (const std::exception& e) {
    status = absl::InternalError(absl::StrCat("unexpected failure: ", e.what()));
  }
  // Stopped by a signal, every rank at the same step (they agreed): a
  // clean exit with the shell's code for it, not an abort.
  if (status.code() == absl::StatusCode::kCancelled) {
    if (comm->rank() == 0)
      std::fprintf(stderr, "stepc-run: %s\n", std::string(status.message()).c_str());
    comm.reset();
    if (*mpi) stepc::MpiFinalize();
    return 128 + (stepc::StopSignal() != 0 ? stepc::StopSignal() : SIGTERM);
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
