// The training job stepc-run runs, as a library: threads, session, data,
// the ranks' agreement, resume, the step loop with its schedule, streamed
// metrics, plot, evaluation, checkpoints, sampling and output files. Each
// concern lives in its own part (options, schedule, data_source, agreement,
// checkpoint_policy, evaluation, sampler, metrics_log, loss_plot, outputs);
// this file only orders them, so a C++ host gets the same job.

#ifndef STEPC_RUNTIME_TRAIN_TRAINER_H_
#define STEPC_RUNTIME_TRAIN_TRAINER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/options.h"

namespace stepc {

// Trains the step.so at `path` as `o` asks, over `comm` (one rank: a local
// communicator). Progress goes to stdout on rank 0. Every rank calls it.
absl::Status RunTrainingJob(const std::string& path, const TrainOptions& o,
                            std::shared_ptr<Communicator> comm);

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_TRAINER_H_
