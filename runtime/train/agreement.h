// Under MPI every rank must train the same run: a rank with other options
// or data would wait forever in a collective, or silently diverge.

#ifndef STEPC_RUNTIME_TRAIN_AGREEMENT_H_
#define STEPC_RUNTIME_TRAIN_AGREEMENT_H_

#include <string>

#include "absl/status/status.h"
#include "runtime/comm/communicator.h"
#include "runtime/formats/data.h"
#include "runtime/train/options.h"
#include "runtime/train/schedule.h"

namespace stepc {

// Each option that changes what the ranks do together or what they compute
// (the schedule, inputs, outputs, checkpoints, evaluation, sampling) and the
// training tokens are compared on their own, so a difference is an error
// naming the option (and both values, for numbers). Collective: every rank
// calls it.
absl::Status AgreeOnRun(Communicator& comm, const TrainOptions& o, const Schedule& schedule,
                        const TokenData& data, const std::string& resume_dir);

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_AGREEMENT_H_
