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

// The members, their defaults and their meaning: train_options.def.
struct TrainOptions {
#define STEPC_TRAIN_OPTION(group, type, name, byDefault, help) type name = byDefault;
#include "runtime/train/train_options.def"
#undef STEPC_TRAIN_OPTION
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
