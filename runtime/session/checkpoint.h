// Checkpoints: a directory holding one rank's shards per file and one
// metadata file, written atomically and checksummed, loadable at any world
// size and sharding of the same model (see docs/training.md).
//
//   DIR/checkpoint.json          format, step, model hash, sharding, global
//                                shapes, shard files, the trainer's state
//   DIR/shard-RRRRR-of-WWWWW.bin one writing rank's rows of every tensor:
//                                magic, index (name, global rows, offset,
//                                CRC-32 per piece), then the float32 rows
//
// Session::SaveCheckpoint and Session::LoadCheckpoint (checkpoint.cc) are
// the entry points; this header holds what they share with their callers.

#ifndef STEPC_RUNTIME_CHECKPOINT_H_
#define STEPC_RUNTIME_CHECKPOINT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/stepc_abi.h"

namespace stepc {

// What a checkpoint says besides its tensors.
struct CheckpointInfo {
  int64_t step = 0;          // steps done when it was written
  std::string model_hash;    // of the state tensors' names, roles and global shapes
  std::string sharding;      // of the run that wrote it ("none", "fsdp:4", ...)
  int world_size = 1;
  std::string trainer_json;  // the trainer's own state, a JSON object ("{}" if none)
  // The pipeline options of the step.so that wrote it (its report's
  // compile_options: the optimizer's hyperparameters among them); empty if
  // not recorded.
  std::string compile_options;
};

// The pipeline options `info`'s step was compiled with (its report's
// compile_options), empty if its report does not say.
std::string CompileOptions(const stepc_module_info& info);

// The directory's metadata file and the version of the format it and the
// shard files are written in.
inline constexpr char kCheckpointMetadataFile[] = "checkpoint.json";
inline constexpr uint32_t kCheckpointFormatVersion = 1;

// CRC-32 (zlib's), as shard pieces and the metadata carry it.
uint32_t Crc32(const void* data, size_t bytes);

// The metadata's checksum: the CRC-32 of its JSON text as written without
// the "checksum" field (keys sorted, numbers round-trip).
uint32_t CheckpointMetadataChecksum(const std::string& text_without_checksum);

// The metadata of the checkpoint at `dir`, read and checked (format,
// version, fields, checksum, step): its JSON text, and what it says of
// itself in `info`.
absl::StatusOr<std::string> ReadCheckpointMetadata(const std::string& dir, CheckpointInfo& info);

// The metadata file of the checkpoint at `dir`: NotFound if there is none,
// DataLoss if it is unreadable or not a stepc checkpoint.
absl::StatusOr<CheckpointInfo> ReadCheckpointInfo(const std::string& dir);

// The newest complete checkpoint under `dir`: `dir` itself if it holds a
// checkpoint.json, else its subdirectory step-NNNNNNNN with the highest
// step that does (a partial one, left by a crash, is never chosen).
// NotFound if there is none.
absl::StatusOr<std::string> FindLatestCheckpoint(const std::string& dir);

// The directory stepc-run writes the checkpoint of `step` to, under `root`.
std::string CheckpointDirForStep(const std::string& root, int64_t step);

// After saving `written` (a checkpoint under `root`): removes all but the
// newest `keep` complete checkpoints of the same model that are no newer
// than it (`written` itself always stays; another model's or a later run's
// step-N directories are not this run's to delete), and the partial ones (a
// crash's leftovers) older than it.
absl::Status PruneCheckpoints(const std::string& root, const std::string& written,
                              int64_t keep);

}  // namespace stepc

#endif  // STEPC_RUNTIME_CHECKPOINT_H_
