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
#include <map>
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
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/interrupt.h"
#include "runtime/train/options.h"
#include "runtime/train/trainer.h"

// The defaults are the training job's (runtime/train/options.h).
static const stepc::TrainOptions kDefaults;

ABSL_FLAG(std::string, data, "", "token file: flat uint16 (nanoGPT) or llm.c's .bin");
ABSL_FLAG(std::string, corpus, "", "text file, trained on under a character tokenizer");
ABSL_FLAG(int64_t, steps, kDefaults.steps,
          "training steps (0: none; --sample, --save-safetensors or --save-npy of the weights "
          "loaded by --init-npy, --init-safetensors or --resume)");
ABSL_FLAG(double, lr, kDefaults.lr, "peak learning rate");
ABSL_FLAG(int64_t, warmup, kDefaults.warmup, "linear warmup steps (then cosine decay)");
ABSL_FLAG(double, min_lr_ratio, kDefaults.min_lr_ratio,
          "final learning rate as a fraction of --lr");
ABSL_FLAG(uint64_t, seed, kDefaults.seed, "seed for parameters, batches and dropout masks");
ABSL_FLAG(int64_t, log_every, kDefaults.log_every, "print a progress line every K steps");
ABSL_FLAG(std::string, metrics, "", "write one JSON line per step here");
ABSL_FLAG(std::string, summary, "",
          "write the end-of-run summary here (JSON): step time, memory and time in "
          "collectives, each measured beside its prediction");
ABSL_FLAG(std::string, plot, "", "write the loss curve here (SVG)");
ABSL_FLAG(bool, plot_log, kDefaults.plot_log, "draw --plot's loss axis on a logarithmic scale");
ABSL_FLAG(std::string, trace, "",
          "write a Chrome trace-event timeline of --trace-steps here (Perfetto, "
          "chrome://tracing): host phases, and every kernel of a step.so built with "
          "stepc --profile; rank r > 0 writes FILE.rank<r>");
ABSL_FLAG(std::string, trace_steps, kDefaults.trace_steps,
          "the steps --trace records: A:B, A or all");
ABSL_FLAG(std::string, init_npy, "", "load parameters from DIR/<name>.npy");
ABSL_FLAG(std::string, init_safetensors, "",
          "load parameters from a safetensors FILE by name (stepc.export's init.safetensors, "
          "or any file holding every parameter; other tensors are ignored)");
ABSL_FLAG(bool, init_missing, kDefaults.init_missing,
          "with --init-npy or --init-safetensors: parameters the source lacks keep their "
          "initialisers' values instead of failing (a pretrained base file without the "
          "adapters a fine-tune adds); they are listed");
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
ABSL_FLAG(int64_t, save_every, kDefaults.save_every,
          "checkpoint every K steps (0: only after the last)");
ABSL_FLAG(int64_t, keep, kDefaults.keep, "keep only the newest N checkpoints (0: all)");
ABSL_FLAG(bool, auto_resume, kDefaults.auto_resume,
          "resume from the newest checkpoint under --checkpoint-dir if there is one, else start "
          "afresh (a job that is requeued runs the same command again)");
ABSL_FLAG(std::string, resume, "",
          "continue from a checkpoint: DIR itself, or the newest DIR/step-NNNNNNNN; schedule "
          "flags not given default to the checkpoint's");
ABSL_FLAG(std::string, val_data, "", "validation token file (as --data) for --eval-every");
ABSL_FLAG(double, val_fraction, kDefaults.val_fraction,
          "hold out the last fraction of the training tokens for validation (0: none)");
ABSL_FLAG(int64_t, eval_every, kDefaults.eval_every,
          "evaluate the validation loss before the first step, every K steps and after the "
          "last (0: only after the last, when there is validation data)");
ABSL_FLAG(int64_t, eval_batches, kDefaults.eval_batches,
          "validation batches per evaluation (the same each time)");
ABSL_FLAG(int64_t, sample, kDefaults.sample,
          "after training, generate this many characters or tokens from --prompt (the "
          "vocabulary of --corpus or the embedded corpus, or --vocab's)");
ABSL_FLAG(int64_t, sample_every, kDefaults.sample_every,
          "also sample (--sample tokens from --prompt) every K steps while training, as llm.c "
          "does (0: only after the last)");
ABSL_FLAG(std::string, prompt, "\n",
          "the text --sample continues (a token vocabulary without --prompt: from end of text)");
ABSL_FLAG(std::string, vocab, "",
          "the vocabulary of --data token files, for --sample: scripts/prepare_data.py's "
          "meta.json (characters) or llm.c's tokenizer file (tokens: prepare_data --tokenizer "
          "gpt2 writes tokenizer.bin)");
ABSL_FLAG(double, temperature, kDefaults.temperature,
          "sampling temperature (0: the most likely token)");
ABSL_FLAG(int64_t, top_k, kDefaults.top_k, "sample among the k most likely tokens (0: all)");
ABSL_FLAG(double, peak_tflops, kDefaults.peak_tflops,
          "the peak TFLOP/s per rank MFU is measured against (0: a GEMM probe on the CPU, "
          "cached; NVIDIA's datasheet for H100, H200 and A100)");
ABSL_FLAG(int32_t, threads, kDefaults.threads,
          "CPU threads per rank (0: OMP_NUM_THREADS if set, else the cores divided among the "
          "ranks on this node)");

namespace stepc {
namespace {

// The flags as the training job's options.
TrainOptions OptionsFromFlags(absl::flat_hash_set<std::string> given) {
  TrainOptions o;
  o.data = absl::GetFlag(FLAGS_data);
  o.corpus = absl::GetFlag(FLAGS_corpus);
  o.steps = absl::GetFlag(FLAGS_steps);
  o.lr = absl::GetFlag(FLAGS_lr);
  o.warmup = absl::GetFlag(FLAGS_warmup);
  o.min_lr_ratio = absl::GetFlag(FLAGS_min_lr_ratio);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.log_every = absl::GetFlag(FLAGS_log_every);
  o.metrics = absl::GetFlag(FLAGS_metrics);
  o.summary = absl::GetFlag(FLAGS_summary);
  o.plot = absl::GetFlag(FLAGS_plot);
  o.plot_log = absl::GetFlag(FLAGS_plot_log);
  o.trace = absl::GetFlag(FLAGS_trace);
  o.peak_tflops = absl::GetFlag(FLAGS_peak_tflops);
  o.trace_steps = absl::GetFlag(FLAGS_trace_steps);
  o.init_npy = absl::GetFlag(FLAGS_init_npy);
  o.init_safetensors = absl::GetFlag(FLAGS_init_safetensors);
  o.init_missing = absl::GetFlag(FLAGS_init_missing);
  o.save_safetensors = absl::GetFlag(FLAGS_save_safetensors);
  o.batch_npy = absl::GetFlag(FLAGS_batch_npy);
  o.val_batch_npy = absl::GetFlag(FLAGS_val_batch_npy);
  o.save_outputs = absl::GetFlag(FLAGS_save_outputs);
  o.save_npy = absl::GetFlag(FLAGS_save_npy);
  o.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  o.save_every = absl::GetFlag(FLAGS_save_every);
  o.keep = absl::GetFlag(FLAGS_keep);
  o.auto_resume = absl::GetFlag(FLAGS_auto_resume);
  o.resume = absl::GetFlag(FLAGS_resume);
  o.val_data = absl::GetFlag(FLAGS_val_data);
  o.val_fraction = absl::GetFlag(FLAGS_val_fraction);
  o.eval_every = absl::GetFlag(FLAGS_eval_every);
  o.eval_batches = absl::GetFlag(FLAGS_eval_batches);
  o.sample = absl::GetFlag(FLAGS_sample);
  o.sample_every = absl::GetFlag(FLAGS_sample_every);
  o.prompt = absl::GetFlag(FLAGS_prompt);
  o.vocab = absl::GetFlag(FLAGS_vocab);
  o.temperature = absl::GetFlag(FLAGS_temperature);
  o.top_k = absl::GetFlag(FLAGS_top_k);
  o.threads = absl::GetFlag(FLAGS_threads);
  o.given = std::move(given);
  return o;
}

// The flags by what they are for; one missing from every group is listed
// under "other" (so none is ever hidden).
void PrintHelp() {
  static const std::pair<const char*, std::vector<const char*>> kGroups[] = {
      {"data", {"data", "corpus", "batch_npy", "val_data", "val_fraction", "val_batch_npy",
                "vocab"}},
      {"schedule", {"steps", "lr", "warmup", "min_lr_ratio", "seed"}},
      {"parameters in and out", {"init_npy", "init_safetensors", "init_missing", "save_npy", "save_safetensors"}},
      {"checkpoints", {"checkpoint_dir", "save_every", "keep", "resume", "auto_resume"}},
      {"evaluation and sampling", {"eval_every", "eval_batches", "save_outputs", "sample",
                                   "sample_every", "prompt", "temperature", "top_k"}},
      {"progress and logs", {"log_every", "metrics", "summary", "plot", "plot_log", "trace", "trace_steps"}},
      {"machine", {"threads", "peak_tflops"}},
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
