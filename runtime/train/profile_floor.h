// Where a `stepc --profile` build's time went against what the hardware
// allows: the per-kind table the step.so writes to $STEPC_PROFILE when it
// is unloaded, each kind's floor (its FLOPs at the peak or its bytes at
// the memory bandwidth, whichever is longer) and measured / floor. What
// stepc-run prints after such a run (scripts/profile_floor.py computes the
// same from the file).

#ifndef STEPC_RUNTIME_TRAIN_PROFILE_FLOOR_H_
#define STEPC_RUNTIME_TRAIN_PROFILE_FLOOR_H_

#include <string>

#include "absl/status/statusor.h"

namespace stepc {

struct FloorRates {
  double gflops = 0;  // the dense peak, per rank
  double gbps = 0;    // memory bandwidth (bytes read and written per second)
  std::string source;
};

// The table, largest time first, for the profile JSON `text`; an error if
// it is not one or the rates are unknown.
absl::StatusOr<std::string> ProfileFloorTable(const std::string& text, const FloorRates& rates);

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_PROFILE_FLOOR_H_
