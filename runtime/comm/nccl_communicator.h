// The NCCL communicator for GPU ranks: one NCCL communicator per mesh axis,
// bootstrapped by broadcasting each unique id over MPI (as nccl-tests and
// llm.c do); collectives run on a communication stream, and Wait makes the
// compute stream wait for them (no host synchronisation).

#ifndef STEPC_RUNTIME_NCCL_COMMUNICATOR_H_
#define STEPC_RUNTIME_NCCL_COMMUNICATOR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/comm/communicator.h"

namespace stepc {

// Requires MPI to be initialised (MpiInitIfLaunched) and one visible GPU per
// rank (device = local rank modulo the device count). `compute_stream` is the
// cudaStream_t the step runs on (nullptr: the default stream); `mpi_comm`
// (a `const MPI_Comm*`, null: the world) holds the ranks and bootstraps
// NCCL's unique ids.
absl::StatusOr<std::unique_ptr<Communicator>> MakeNcclCommunicator(void* compute_stream,
                                                                   const void* mpi_comm);

}  // namespace stepc

#endif  // STEPC_RUNTIME_NCCL_COMMUNICATOR_H_
