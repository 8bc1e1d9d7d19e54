// Collectives between the ranks of a data-parallel step: MPI on CPUs (NCCL
// on GPUs will implement the same interface). Every failure is a status.

#ifndef STEPC_RUNTIME_COMMUNICATOR_H_
#define STEPC_RUNTIME_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/stepc_abi.h"

namespace stepc {

class Communicator {
 public:
  Communicator();
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // data[0..count) = Σ over ranks, in place.
  virtual absl::Status AllReduceSum(float* data, int64_t count) = 0;
  // recv = the concatenation of every rank's send (count floats each).
  virtual absl::Status AllGather(const float* send, float* recv, int64_t count) = 0;
  // recv = Σ over ranks of rank r's block r of send (count floats each).
  virtual absl::Status ReduceScatterSum(const float* send, float* recv, int64_t count) = 0;
  // Every rank's `value`, in rank order.
  virtual absl::StatusOr<std::vector<uint64_t>> AllGather(uint64_t value) = 0;

  // The C table a step.so calls; its failures keep their status here.
  const stepc_collectives* table() {
    table_.rank = rank();
    table_.size = size();
    return &table_;
  }
  const absl::Status& last_error() const { return last_error_; }

 private:
  static int AllReduceThunk(void* ctx, float* data, int64_t count);
  static int AllGatherThunk(void* ctx, const float* send, float* recv, int64_t count);
  static int ReduceScatterThunk(void* ctx, const float* send, float* recv, int64_t count);
  stepc_collectives table_;
  absl::Status last_error_;
};

// A world of one rank: collectives are identities.
std::unique_ptr<Communicator> MakeLocalCommunicator();

// MPI. `MpiInitIfLaunched` initialises MPI when the process was started by a
// launcher (mpirun/srun: OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK set) and
// reports whether it did; `MpiFinalize` ends it.
absl::StatusOr<bool> MpiInitIfLaunched(int* argc, char*** argv);
void MpiFinalize();
// Ends every rank of the job (a failed rank must not leave the others
// waiting in a collective).
[[noreturn]] void MpiAbort(int code);
absl::StatusOr<std::unique_ptr<Communicator>> MakeMpiWorldCommunicator();

}  // namespace stepc

#endif  // STEPC_RUNTIME_COMMUNICATOR_H_
