// What a training job is asked to do: stepc-run's flags as plain values, so
// that any host (stepc-run, a C++ trainer) drives the same job.

#ifndef STEPC_RUNTIME_TRAIN_OPTIONS_H_
#define STEPC_RUNTIME_TRAIN_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace stepc {

struct TrainOptions {
  // Data.
  std::string data, corpus, batch_npy;  // none: the embedded corpus
  std::string val_data, val_batch_npy, vocab;
  double val_fraction = 0;
  // Schedule.
  int64_t steps = 200;
  double lr = 1e-3;
  int64_t warmup = 10;
  double min_lr_ratio = 0.1;
  uint64_t seed = 0;
  // Parameters in and out.
  std::string init_npy, init_safetensors, save_safetensors, save_npy, save_outputs;
  // With --init-npy or --init-safetensors: parameters the source lacks keep
  // their initialisers' values (a pretrained base without new adapters).
  bool init_missing = false;
  // Checkpoints.
  std::string checkpoint_dir, resume;
  int64_t save_every = 0, keep = 0;
  bool auto_resume = false;
  // Evaluation and sampling.
  int64_t eval_every = 0, eval_batches = 10, sample = 0, sample_every = 0, top_k = 200;
  std::string prompt = "\n";
  double temperature = 0.8;
  // Progress.
  int64_t log_every = 10;
  std::string metrics, plot;
  // The end-of-run summary (measured beside predicted) as JSON.
  std::string summary;
  bool plot_log = false;
  // A Chrome trace-event timeline of these steps ("A:B", "A" or "all").
  std::string trace, trace_steps = "2:3";
  // Machine.
  int32_t threads = 0;
  double peak_tflops = 0;  // MFU's peak per rank; 0: probed (CPU) or a GPU table
  // The options given explicitly (by their underscore names, "min_lr_ratio"):
  // a resumed run follows the checkpoint for the rest.
  absl::flat_hash_set<std::string> given;
  bool Given(const std::string& name) const { return given.contains(name); }
};

// The options of a JSON object whose keys are the option names as stepc-run
// spells them, with dashes or underscores ({"steps": 100, "metrics":
// "m.jsonl", "val-fraction": 0.1}); each key is a given option. An unknown
// key or a value of the wrong type is an error naming it.
absl::StatusOr<TrainOptions> TrainOptionsFromJson(const std::string& text);

// Every option is checked, and every output's directory, before anything is
// loaded or written: a bad invocation changes no file.
absl::Status ValidateOptions(const TrainOptions& o);

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_OPTIONS_H_
