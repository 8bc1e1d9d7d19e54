// When a training job resumes and saves: the checkpoint to resume (--resume,
// or --auto-resume's latest), what a resume says about the run it
// continues, when to save, and how many checkpoints to keep.

#ifndef STEPC_RUNTIME_TRAIN_CHECKPOINT_POLICY_H_
#define STEPC_RUNTIME_TRAIN_CHECKPOINT_POLICY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/session/checkpoint.h"
#include "runtime/session/session.h"
#include "runtime/train/options.h"

namespace stepc {

// The checkpoint a run resumes; `dir` empty: none.
struct ResumePoint {
  std::string dir;
  CheckpointInfo info;
  nlohmann::json trainer;  // its trainer state (discarded if not JSON)
};

// --resume's latest checkpoint, else with --auto-resume the checkpoint
// directory's latest if it has one, else none.
absl::StatusOr<ResumePoint> FindResumePoint(const TrainOptions& o);

// Loads the checkpoint into the session; on the lead rank notes a step.so
// compiled with other options than the one that wrote it (the sharding
// aside: checkpoints reshard) and says where the run resumes.
absl::Status ResumeSession(Session& session, const ResumePoint& resume, bool lead);

// Whether step `step` of `steps` writes a checkpoint.
bool ShouldSaveCheckpoint(const TrainOptions& o, int64_t step, int64_t steps);

// Writes step `step`'s checkpoint under --checkpoint-dir with the trainer
// state `trainer` (every rank its shard), then the lead rank prunes to
// --keep and reports it.
absl::Status SaveTrainingCheckpoint(Session& session, const TrainOptions& o, int64_t step,
                                    const nlohmann::json& trainer, bool lead);

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_CHECKPOINT_POLICY_H_
