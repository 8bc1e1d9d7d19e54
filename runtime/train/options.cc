#include "runtime/train/options.h"

#include "runtime/train/trace.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace stepc {

absl::StatusOr<TrainOptions> TrainOptionsFromJson(const std::string& text) {
  using Field =
      std::variant<std::string TrainOptions::*, int64_t TrainOptions::*, double TrainOptions::*,
                   uint64_t TrainOptions::*, bool TrainOptions::*, int32_t TrainOptions::*>;
  static const std::pair<const char*, Field> kFields[] = {
#define STEPC_TRAIN_OPTION(group, type, name, byDefault, help) {#name, &TrainOptions::name},
#include "runtime/train/train_options.def"
#undef STEPC_TRAIN_OPTION
  };

  const nlohmann::json options = nlohmann::json::parse(text, nullptr, false);
  if (options.is_discarded() || !options.is_object())
    return absl::InvalidArgumentError("the training options are not a JSON object");
  TrainOptions o;
  for (const auto& item : options.items()) {
    // (Not a structured binding: C++17 lambdas cannot capture those.)
    const std::string key = item.key();
    const nlohmann::json& value = item.value();
    std::string name = key;
    std::replace(name.begin(), name.end(), '-', '_');
    const auto* field = std::find_if(std::begin(kFields), std::end(kFields),
                                     [&](const auto& f) { return name == f.first; });
    if (field == std::end(kFields)) {
      std::vector<std::string> known;
      for (const auto& f : kFields) known.push_back(f.first);
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown training option '", key, "' (known: ", absl::StrJoin(known, ", "), ")"));
    }
    const char* expected = nullptr;
    std::visit(
        [&](auto member) {
          using T = std::decay_t<decltype(o.*member)>;
          if constexpr (std::is_same_v<T, std::string>) {
            if (value.is_string())
              o.*member = value.get<std::string>();
            else
              expected = "a string";
          } else if constexpr (std::is_same_v<T, bool>) {
            if (value.is_boolean())
              o.*member = value.get<bool>();
            else
              expected = "true or false";
          } else if constexpr (std::is_same_v<T, double>) {
            if (value.is_number())
              o.*member = value.get<double>();
            else
              expected = "a number";
          } else if constexpr (std::is_same_v<T, uint64_t>) {
            if (value.is_number_unsigned())
              o.*member = value.get<uint64_t>();
            else
              expected = "a non-negative integer";
          } else {
            // Signed integers: in range of the field (a wrap would be
            // another value, silently).
            if (value.is_number_integer() &&
                value.get<int64_t>() >= std::numeric_limits<T>::min() &&
                value.get<int64_t>() <= std::numeric_limits<T>::max())
              o.*member = static_cast<T>(value.get<int64_t>());
            else
              expected = "an integer";
          }
        },
        field->second);
    if (expected)
      return absl::InvalidArgumentError(
          absl::StrCat("training option '", key, "' is ", value.dump(), "; expected ", expected));
    o.given.insert(name);
  }
  return o;
}

namespace {

// Each file an option names can be written (its directory exists, it is not
// a directory, a FIFO or a socket), and each directory one names can be
// made (its nearest existing ancestor is a directory): said before a step
// runs, not after the training.
absl::Status ValidateOutputPaths(const TrainOptions& o) {
  std::error_code ec;
  for (const auto& [flag, path] : {std::pair<const char*, std::string>{"--metrics", o.metrics},
                                   {"--plot", o.plot},
                                   {"--summary", o.summary},
                                   {"--trace", o.trace},
                                   {"--save-safetensors", o.save_safetensors}}) {
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
  for (const auto& [flag, dir] : {std::pair<const char*, std::string>{"--save-npy", o.save_npy},
                                  {"--checkpoint-dir", o.checkpoint_dir},
                                  {"--save-outputs", o.save_outputs}}) {
    if (dir.empty()) continue;
    // Its nearest existing ancestor must be a directory.
    std::filesystem::path at = std::filesystem::absolute(dir, ec);
    while (!at.empty() && !std::filesystem::exists(at, ec) && at != at.parent_path())
      at = at.parent_path();
    if (!std::filesystem::is_directory(at, ec))
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " '", dir, "': '", at.string(), "' is not a directory"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateOptions(const TrainOptions& o) {
  if (o.steps < 0)
    return absl::InvalidArgumentError(
        "--steps must be >= 0 (0: no training step; sample, evaluate or save the loaded weights)");
  if (o.log_every < 1) return absl::InvalidArgumentError("--log-every must be at least 1");
  if (!(o.lr >= 0) || !std::isfinite(o.lr) || o.warmup < 0 ||
      !(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1))
    return absl::InvalidArgumentError(
        "--lr must be finite and >= 0, --warmup >= 0 and --min-lr-ratio in [0, 1]");
  int sources = !o.data.empty() + !o.corpus.empty() + !o.batch_npy.empty();
  if (sources > 1)
    return absl::InvalidArgumentError("give at most one of --data, --corpus and --batch-npy");
  if (absl::Status paths = ValidateOutputPaths(o); !paths.ok()) return paths;
  if (absl::Status steps = ParseTraceSteps(o.trace_steps).status(); !steps.ok()) return steps;
  if (o.save_every < 0 || o.keep < 0)
    return absl::InvalidArgumentError("--save-every and --keep must be >= 0");
  if (o.save_every > 0 && o.checkpoint_dir.empty())
    return absl::InvalidArgumentError("--save-every needs --checkpoint-dir");
  if (o.init_missing && o.init_npy.empty() && o.init_safetensors.empty())
    return absl::InvalidArgumentError(
        "--init-missing goes with --init-npy or --init-safetensors (it lets them lack "
        "parameters)");
  if (o.auto_resume && o.checkpoint_dir.empty())
    return absl::InvalidArgumentError("--auto-resume needs --checkpoint-dir");
  if (!(o.peak_tflops >= 0) || !std::isfinite(o.peak_tflops))
    return absl::InvalidArgumentError("--peak-tflops must be finite and >= 0");
  if (o.threads < 0 || o.threads > 4096)
    return absl::InvalidArgumentError("--threads must be in [0, 4096]");
  if (o.eval_every < 0 || o.eval_batches < 1)
    return absl::InvalidArgumentError("--eval-every must be >= 0 and --eval-batches >= 1");
  if (!(o.val_fraction >= 0 && o.val_fraction < 1))
    return absl::InvalidArgumentError("--val-fraction must be in [0, 1)");
  if ((o.val_fraction > 0 || !o.val_data.empty()) && !o.batch_npy.empty())
    return absl::InvalidArgumentError(
        "--val-data and --val-fraction need token data (--data, --corpus or the embedded corpus), "
        "not --batch-npy");
  const int val_sources = (o.val_fraction > 0) + !o.val_data.empty() + !o.val_batch_npy.empty();
  if (val_sources > 1)
    return absl::InvalidArgumentError("give one of --val-data, --val-fraction and --val-batch-npy");
  if (o.eval_every > 0 && val_sources == 0)
    return absl::InvalidArgumentError(
        "--eval-every needs --val-data, --val-fraction or --val-batch-npy");
  if (o.sample < 0 || o.top_k < 0 || !(o.temperature >= 0) || !std::isfinite(o.temperature))
    return absl::InvalidArgumentError(
        "--sample and --top-k must be >= 0 and --temperature finite and >= 0");
  if (o.sample_every < 0)
    return absl::InvalidArgumentError("--sample-every must be >= 0");
  if (o.sample_every > 0 && o.sample == 0)
    return absl::InvalidArgumentError(
        "--sample-every needs --sample N (the tokens each sample draws)");
  if (o.sample > 0 && o.prompt.empty())
    return absl::InvalidArgumentError("--prompt is empty: sampling continues some text");
  if (!o.resume.empty() + !o.init_npy.empty() + !o.init_safetensors.empty() > 1)
    return absl::InvalidArgumentError(
        "give one of --resume, --init-npy and --init-safetensors (a checkpoint holds the "
        "parameters)");
  return absl::OkStatus();
}

}  // namespace stepc
