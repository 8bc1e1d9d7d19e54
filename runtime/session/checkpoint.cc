// The checkpoint directory's format, without a session: its metadata file
// (read, checked against its CRC-32, described), the directory of a step,
// the latest complete checkpoint under a root and the pruning of older
// ones. session_checkpoint.cc saves and loads a Session's state with it.

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "runtime/session/checkpoint.h"
#include "runtime/status_macros.h"

namespace stepc {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The largest step count a checkpoint may hold: far beyond any run, far
// below where a step's arithmetic (the schedule, the AdamW bias correction
// in f32) stops meaning anything.
constexpr int64_t kMaxSteps = int64_t{1} << 40;

// CRC-32 of the metadata's JSON without its "checksum" field (object keys
// are sorted, numbers printed round-trip, so a read-back file hashes alike).
uint32_t MetadataChecksum(json meta) {
  meta.erase("checksum");
  return CheckpointMetadataChecksum(meta.dump());
}

// The metadata file of the checkpoint at `dir`, read and checked once: its
// JSON, and what it says of itself in `info`.
absl::StatusOr<json> ReadMetadata(const std::string& dir, CheckpointInfo& info) {
  const std::string path = absl::StrCat(dir, "/", kCheckpointMetadataFile);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    return absl::NotFoundError(absl::StrCat(
        "no checkpoint at '", dir, "' (", fs::exists(dir, ec) ? "no " : "no directory; no ",
        kCheckpointMetadataFile, ")"));
  auto corrupt = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat("checkpoint '", path, "' ", why));
  };
  // Metadata is kilobytes; a larger file is not ours (and is not read whole).
  if (fs::file_size(path, ec) > (uintmax_t{64} << 20)) return corrupt("is larger than 64 MiB");
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  json meta = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (meta.is_discarded() || !meta.is_object()) return corrupt("is not valid JSON");
  if (meta.value("format", "") != "stepc-checkpoint")
    return corrupt("is not a stepc checkpoint (no \"format\": \"stepc-checkpoint\")");
  if (!meta.contains("version") || !meta["version"].is_number_unsigned() ||
      meta["version"].get<uint64_t>() != kCheckpointFormatVersion)
    return corrupt(absl::StrCat("has a format version this runtime does not read (it reads ",
                                kCheckpointFormatVersion, ")"));
  if (!meta.contains("step") || !meta["step"].is_number_integer() || meta["step"].get<int64_t>() < 0 ||
      !meta.contains("model_hash") || !meta["model_hash"].is_string() ||
      !meta.contains("sharding") || !meta["sharding"].is_string() ||
      !meta.contains("world_size") || !meta["world_size"].is_number_integer() ||
      meta["world_size"].get<int64_t>() < 1 || meta["world_size"].get<int64_t>() > (1 << 20) ||
      !meta.contains("tensors") || !meta["tensors"].is_array() ||
      !meta.contains("shards") || !meta["shards"].is_array() ||
      !meta.contains("trainer") || !meta["trainer"].is_object())
    return corrupt("lacks a field or has one of the wrong type (step, model_hash, sharding, "
                   "world_size, tensors, shards, trainer)");
  if (!meta.contains("checksum") || !meta["checksum"].is_number_unsigned())
    return corrupt("has no checksum (written by an older stepc, or edited): its fields cannot "
                   "be trusted");
  if (meta["checksum"].get<uint64_t>() != MetadataChecksum(meta))
    return corrupt("fails its checksum: a field was edited or corrupted after it was written");
  if (meta["step"].get<int64_t>() > kMaxSteps)
    return corrupt(absl::StrCat("holds step ", meta["step"].get<int64_t>(),
                                ", beyond any run (at most ", kMaxSteps, ")"));
  info.step = meta["step"].get<int64_t>();
  info.model_hash = meta["model_hash"].get<std::string>();
  info.sharding = meta["sharding"].get<std::string>();
  info.world_size = meta["world_size"].get<int>();
  info.trainer_json = meta["trainer"].dump();
  if (meta.contains("compile_options") && meta["compile_options"].is_string())
    info.compile_options = meta["compile_options"].get<std::string>();
  return meta;
}

}  // namespace

uint32_t Crc32(const void* data, size_t bytes) {
  return static_cast<uint32_t>(crc32_z(0L, static_cast<const Bytef*>(data), bytes));
}

uint32_t CheckpointMetadataChecksum(const std::string& text_without_checksum) {
  return Crc32(text_without_checksum.data(), text_without_checksum.size());
}

absl::StatusOr<std::string> ReadCheckpointMetadata(const std::string& dir, CheckpointInfo& info) {
  STEPC_ASSIGN_OR_RETURN(const json meta, ReadMetadata(dir, info));
  return meta.dump();
}

absl::StatusOr<CheckpointInfo> ReadCheckpointInfo(const std::string& dir) {
  CheckpointInfo info;
  STEPC_RETURN_IF_ERROR(ReadMetadata(dir, info).status());
  return info;
}

std::string CompileOptions(const stepc_module_info& info) {
  if (!info.report_json) return "";
  const json report = json::parse(info.report_json, nullptr, /*allow_exceptions=*/false);
  if (!report.is_object() || !report.contains("compile_options") ||
      !report["compile_options"].is_string())
    return "";
  return report["compile_options"].get<std::string>();
}

std::string CheckpointDirForStep(const std::string& root, int64_t step) {
  return absl::StrFormat("%s/step-%08d", root, step);
}

namespace {

// Complete checkpoints under `root` by step (step-NNNNNNNN with a
// checkpoint.json).
std::map<int64_t, fs::path> CompleteCheckpoints(const std::string& root) {
  std::map<int64_t, fs::path> found;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    int64_t step;
    if (name.rfind("step-", 0) == 0 && absl::SimpleAtoi(name.substr(5), &step) &&
        name.find_first_not_of("0123456789", 5) == std::string::npos &&
        fs::is_regular_file(it->path() / kCheckpointMetadataFile, ec))
      found[step] = it->path();
  }
  return found;
}

}  // namespace

absl::StatusOr<std::string> FindLatestCheckpoint(const std::string& dir) {
  std::error_code ec;
  if (fs::is_regular_file(fs::path(dir) / kCheckpointMetadataFile, ec)) return dir;
  if (!fs::is_directory(dir, ec))
    return absl::NotFoundError(absl::StrCat("no checkpoint directory '", dir, "'"));
  std::map<int64_t, fs::path> found = CompleteCheckpoints(dir);
  if (found.empty())
    return absl::NotFoundError(absl::StrCat(
        "no complete checkpoint under '", dir, "' (no ", kCheckpointMetadataFile,
        " in it or in a step-NNNNNNNN subdirectory)"));
  return found.rbegin()->second.string();
}

absl::Status PruneCheckpoints(const std::string& root, const std::string& written,
                              int64_t keep) {
  CheckpointInfo mine;
  STEPC_RETURN_IF_ERROR(ReadMetadata(written, mine).status());
  std::error_code ec;
  // A crash's leftover step-N.partial older than the checkpoint written.
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    int64_t step;
    if (name.rfind("step-", 0) == 0 && absl::EndsWith(name, ".partial") &&
        absl::SimpleAtoi(name.substr(5, name.size() - 5 - 8), &step) && step < mine.step) {
      std::error_code ignored;
      fs::remove_all(it->path(), ignored);
    }
  }
  // This model's checkpoints up to the one written, newest last.
  std::vector<fs::path> ours;
  for (const auto& [step, path] : CompleteCheckpoints(root)) {
    CheckpointInfo info;
    if (step <= mine.step && ReadMetadata(path.string(), info).ok() &&
        info.model_hash == mine.model_hash && !fs::equivalent(path, written, ec))
      ours.push_back(path);
  }
  // `written` is one of the `keep`.
  const int64_t excess = static_cast<int64_t>(ours.size()) - (std::max<int64_t>(keep, 1) - 1);
  for (int64_t k = 0; k < excess; ++k) {
    fs::remove_all(ours[k], ec);
    if (ec)
      return absl::PermissionDeniedError(
          absl::StrCat("cannot remove the old checkpoint '", ours[k].string(), "': ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace stepc
