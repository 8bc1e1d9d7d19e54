#include "runtime/train/checkpoint_policy.h"

#include <chrono>
#include <cstdio>

#include "runtime/status_macros.h"

namespace stepc {

absl::StatusOr<ResumePoint> FindResumePoint(const TrainOptions& o) {
  ResumePoint r;
  std::string from = o.resume;
  if (from.empty() && o.auto_resume && FindLatestCheckpoint(o.checkpoint_dir).ok())
    from = o.checkpoint_dir;
  if (from.empty()) return r;
  STEPC_ASSIGN_OR_RETURN(r.dir, FindLatestCheckpoint(from));
  STEPC_ASSIGN_OR_RETURN(r.info, ReadCheckpointInfo(r.dir));
  r.trainer = nlohmann::json::parse(r.info.trainer_json, nullptr, false);
  return r;
}

absl::Status ResumeSession(Session& session, const ResumePoint& resume, bool lead) {
  STEPC_RETURN_IF_ERROR(session.LoadCheckpoint(resume.dir).status());
  // Another compilation of the model (other optimizer hyperparameters,
  // precision, remat) continues the state, but not the same run.
  // (The sharding may differ: checkpoints reshard.)
  auto unsharded = [](std::string options) {
    const size_t at = options.find(" shard=");
    if (at != std::string::npos) options.erase(at, options.find_first_of(" }", at + 1) - at);
    return options;
  };
  const std::string options = CompileOptions(session.module().info());
  const CheckpointInfo& written = resume.info;
  if (lead && !written.compile_options.empty() && !options.empty() &&
      unsharded(written.compile_options) != unsharded(options))
    std::fprintf(
        stderr,
        "stepc-run: note: checkpoint '%s' was written by a step compiled with %s; this step.so was "
        "compiled with %s: the resumed run continues its state under other options\n",
        resume.dir.c_str(), written.compile_options.c_str(), options.c_str());
  if (lead)
    std::printf("stepc-run: resumed %s at step %lld (written by %s, %d rank%s)\n",
                resume.dir.c_str(), static_cast<long long>(session.steps_done()),
                written.sharding.c_str(), written.world_size, written.world_size > 1 ? "s" : "");
  return absl::OkStatus();
}

bool ShouldSaveCheckpoint(const TrainOptions& o, int64_t step, int64_t steps) {
  return !o.checkpoint_dir.empty() &&
         ((o.save_every > 0 && step % o.save_every == 0) || step == steps);
}

absl::Status SaveTrainingCheckpoint(Session& session, const TrainOptions& o, int64_t step,
                                    const nlohmann::json& trainer, bool lead) {
  const auto start = std::chrono::steady_clock::now();
  const std::string dir = CheckpointDirForStep(o.checkpoint_dir, step);
  STEPC_RETURN_IF_ERROR(session.SaveCheckpoint(dir, trainer.dump()));
  if (lead && o.keep > 0) STEPC_RETURN_IF_ERROR(PruneCheckpoints(o.checkpoint_dir, dir, o.keep));
  if (lead)
    std::printf("stepc-run: checkpoint %s (%.2f s)\n", dir.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return absl::OkStatus();
}

}  // namespace stepc
