// The memory the step's libraries hold beside the memory plan, probed
// before step 1 so that the predicted peak covers it.
//
// The plan counts every tensor of the step (arguments and arena). The
// kernels' libraries add their own: OpenBLAS packs GEMM operands into
// per-thread buffers it keeps, and MPI's nonblocking collectives allocate
// temporaries (a reduce-scatter twice its input) for as long as they run.
// Neither is in the IR, and both depend on the library build, so they are
// measured, not modelled: the step's GEMM kernel runs once on each of the
// step's shapes, and so does each mixture-of-experts product (oneDNN makes
// a primitive per expert weight shape); the communicator runs each kind of the step's collectives
// once at its largest size, then the collectives the step has in flight
// together where their buffers peak (the report's
// collectives_in_flight_peak: MPI's temporaries add up while they run), all
// started before any is waited for. The data memory the process grows by
// meanwhile, less the probe's own operands, is the libraries' workspace.
// Not cached: it is a property of this process.
//
// Not covered: the CUDA step (its plan is device memory).

#ifndef STEPC_RUNTIME_TRAIN_WORKSPACE_H_
#define STEPC_RUNTIME_TRAIN_WORKSPACE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/comm/communicator.h"
#include "runtime/session/module.h"

namespace stepc {

struct LibraryWorkspace {
  bool known = false;
  int64_t gemm_bytes = 0;        // the GEMM library's, held once touched
  int64_t collective_bytes = 0;  // the collectives' temporaries, above gemm_bytes
  int gemm_shapes = 0;           // shapes run (those a probe may allocate)
  int collective_kinds = 0;      // (kind, axes) pairs run, one at a time
  int collectives_in_flight = 0;  // then the report's peak set, together
  int64_t bytes() const { return gemm_bytes + collective_bytes; }
};

// Collective: every rank calls it (the same module and communicator). A
// probe some rank cannot allocate for is skipped on every rank.
absl::StatusOr<LibraryWorkspace> ProbeLibraryWorkspace(const Module& module,
                                                       Communicator& comm);

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_WORKSPACE_H_
