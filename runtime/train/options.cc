#include "runtime/train/options.h"

#include <cmath>
#include <filesystem>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace stepc {

absl::Status ValidateOptions(const TrainOptions &o) {
  if (o.steps < 1)
    return absl::InvalidArgumentError("--steps must be at least 1");
  if (o.log_every < 1)
    return absl::InvalidArgumentError("--log-every must be at least 1");
  if (!(o.lr >= 0) || !std::isfinite(o.lr) || o.warmup < 0 ||
      !(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1))
    return absl::InvalidArgumentError("--lr must be finite and >= 0, --warmup "
                                      ">= 0 and --min-lr-ratio in [0, 1]");
  int sources = !o.data.empty() + !o.corpus.empty() + !o.batch_npy.empty();
  if (sources > 1)
    return absl::InvalidArgumentError(
        "give at most one of --data, --corpus and --batch-npy");
  std::error_code ec;
  for (const auto &[flag, path] :
       {std::pair<const char *, std::string>{"--metrics", o.metrics},
        {"--plot", o.plot},
        {"--save-safetensors", o.save_safetensors}}) {
    if (path.empty())
      continue;
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (std::filesystem::is_directory(path, ec))
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " '", path, "' is a directory"));
    const std::filesystem::file_status status =
        std::filesystem::status(path, ec);
    if (std::filesystem::is_fifo(status) || std::filesystem::is_socket(status))
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write '", path,
                       "': it is a FIFO or socket (it would block)"));
    if (!parent.empty() && !std::filesystem::is_directory(parent, ec))
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " '", path, "': no directory '", parent.string(), "'"));
  }
  for (const auto &[flag, dir] :
       {std::pair<const char *, std::string>{"--save-npy", o.save_npy},
        {"--checkpoint-dir", o.checkpoint_dir},
        {"--save-outputs", o.save_outputs}}) {
    if (dir.empty())
      continue;
    // Its nearest existing ancestor must be a directory.
    std::filesystem::path at = std::filesystem::absolute(dir, ec);
    while (!at.empty() && !std::filesystem::exists(at, ec) &&
           at != at.parent_path())
      at = at.parent_path();
    if (!std::filesystem::is_directory(at, ec))
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " '", dir, "': '", at.string(), "' is not a directory"));
  }
  if (o.save_every < 0 || o.keep < 0)
    return absl::InvalidArgumentError("--save-every and --keep must be >= 0");
  if (o.save_every > 0 && o.checkpoint_dir.empty())
    return absl::InvalidArgumentError("--save-every needs --checkpoint-dir");
  if (o.auto_resume && o.checkpoint_dir.empty())
    return absl::InvalidArgumentError("--auto-resume needs --checkpoint-dir");
  if (o.threads < 0 || o.threads > 4096)
    return absl::InvalidArgumentError("--threads must be in [0, 4096]");
  if (o.eval_every < 0 || o.eval_batches < 1)
    return absl::InvalidArgumentError(
        "--eval-every must be >= 0 and --eval-batches >= 1");
  if (!(o.val_fraction >= 0 && o.val_fraction < 1))
    return absl::InvalidArgumentError("--val-fraction must be in [0, 1)");
  if ((o.val_fraction > 0 || !o.val_data.empty()) && !o.batch_npy.empty())
    return absl::InvalidArgumentError(
        "--val-data and --val-fraction need token data (--data, --corpus or "
        "the embedded "
        "corpus), not --batch-npy");
  const int val_sources =
      (o.val_fraction > 0) + !o.val_data.empty() + !o.val_batch_npy.empty();
  if (val_sources > 1)
    return absl::InvalidArgumentError(
        "give one of --val-data, --val-fraction and --val-batch-npy");
  if (o.eval_every > 0 && val_sources == 0)
    return absl::InvalidArgumentError(
        "--eval-every needs --val-data, --val-fraction or --val-batch-npy");
  if (o.sample < 0 || o.top_k < 0 || !(o.temperature >= 0) ||
      !std::isfinite(o.temperature))
    return absl::InvalidArgumentError(
        "--sample and --top-k must be >= 0 and --temperature finite and >= 0");
  if (o.sample > 0 && o.prompt.empty())
    return absl::InvalidArgumentError(
        "--prompt is empty: sampling continues some text");
  if (!o.resume.empty() + !o.init_npy.empty() + !o.init_safetensors.empty() > 1)
    return absl::InvalidArgumentError(
        "give one of --resume, --init-npy and --init-safetensors (a checkpoint "
        "holds the "
        "parameters)");
  return absl::OkStatus();
}

} // namespace stepc
