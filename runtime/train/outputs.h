// Parameters in and out of a session as files: .npy directories,
// safetensors, the eval step's outputs. Sharded tensors are gathered; the
// lead rank writes what every rank holds alike.

#ifndef STEPC_RUNTIME_TRAIN_OUTPUTS_H_
#define STEPC_RUNTIME_TRAIN_OUTPUTS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/session/session.h"

namespace stepc {

// Every parameter from DIR/<name>.npy (global shapes, finite values).
// With `missing`, a parameter without a file keeps its value and is named
// there instead of failing (at least one must load).
absl::Status LoadParams(Session& session, const std::string& dir,
                        std::vector<std::string>* missing = nullptr);
// Every parameter from a safetensors file, by name; `missing` as above.
// `unused` (if given) gets the file's tensors that are no parameter of the
// model (not loaded: a file of another model shows here, not in silence).
absl::Status LoadSafetensors(Session& session, const std::string& path,
                             std::vector<std::string>* missing = nullptr,
                             std::vector<std::string>* unused = nullptr);
// Every parameter to a safetensors file (every rank gathers; `lead` writes).
absl::Status SaveSafetensors(const Session& session, const std::string& path, bool lead);
// Parameters ("param.<name>"), moments, the last loss and gradient norm as
// .npy under DIR; rank r > 0 writes DIR.rank<r> (replicas, for checks).
// `last` absent (no step this run): no loss.npy and grad_norm.npy.
absl::Status SaveNpy(const Session& session, std::string dir, int rank,
                     std::optional<StepResult> last);
// The eval step on the inputs set: its loss, logits and the loss function's
// outputs as DIR/<name>.npy (rank r > 0 writes DIR.rank<r>).
absl::Status SaveOutputs(Session& session, std::string dir, int rank);

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_OUTPUTS_H_
