// The MPI communicator: the world, or a duplicate of a host's communicator,
// with MPI_ERRORS_RETURN, so a failed call becomes a status naming the call
// instead of aborting the library.

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/mpi_status.h"
#include "runtime/status_macros.h"

namespace stepc {
namespace {

// MPI counts are ints.
absl::StatusOr<int> Count(int64_t count) {
  if (count > INT32_MAX)
    return absl::OutOfRangeError(absl::StrCat("a collective of ", count,
                                              " floats per rank exceeds MPI's int count"));
  return static_cast<int>(count);
}

class MpiCommunicator : public Communicator {
 public:
  // `base` is MPI_COMM_WORLD or a duplicate this communicator owns.
  MpiCommunicator(MPI_Comm base, int rank, int size) : base_(base), rank_(rank), size_(size) {
    for (MPI_Comm& c : comms_) c = base_;
    // STEPC_MPI_P2P_ORDERED=1: point-to-point transfers match by their order
    // per pair, not by tag, as NCCL's do (every transfer goes as tag 0, and
    // MPI does not let messages of one tag overtake each other): a test
    // mode that shows whether a step's send and receive orders agree.
    const char* ordered = std::getenv("STEPC_MPI_P2P_ORDERED");
    ordered_ = ordered && std::string(ordered) == "1";
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;  // MPI freed them
    Free();
    if (base_ != MPI_COMM_WORLD) MPI_Comm_free(&base_);
  }
  const void* mpi_comm() const override { return &base_; }
  int rank() const override { return rank_; }
  int Ranks(int axes) const override {
    absl::StatusOr<MPI_Comm> comm = Comm(axes);
    int n = 0;
    if (comm.ok() && *comm != MPI_COMM_NULL) MPI_Comm_size(*comm, &n);
    return n;
  }
  int size() const override { return size_; }

  absl::Status SetMesh(const std::vector<int>& shape) override {
    int64_t ranks = 1;
    for (int n : shape) ranks *= n;
    if (shape.empty() || shape.size() > static_cast<size_t>(kMaxMeshAxes) || ranks != size_)
      return absl::InvalidArgumentError(absl::StrCat("a mesh of ", absl::StrJoin(shape, "x"),
                                                     " does not hold ", size_, " ranks"));
    Free();
    // One communicator per mask; a mask over every axis is the world.
    const int all = (1 << shape.size()) - 1;
    for (const MeshSplit& split : MeshSplits(shape, rank_)) {
      if (split.mask == all) continue;
      STEPC_MPI_RETURN_IF_ERROR(
          MPI_Comm_split(base_, split.color, rank_, &comms_[split.mask]));
      STEPC_MPI_RETURN_IF_ERROR(MPI_Comm_set_errhandler(comms_[split.mask], MPI_ERRORS_RETURN));
    }
    // Masks naming axes past the mesh's join nothing more.
    for (int mask = all + 1; mask < kMaskCount; ++mask) comms_[mask] = comms_[mask & all];
    return absl::OkStatus();
  }

  // Frees the split communicators (masks past the mesh share a lower
  // mask's: each is freed once).
  void Free() {
    std::vector<MPI_Comm> owned;
    for (MPI_Comm c : comms_)
      if (c != base_ && c != MPI_COMM_SELF && c != MPI_COMM_NULL &&
          std::find(owned.begin(), owned.end(), c) == owned.end())
        owned.push_back(c);
    for (MPI_Comm& c : owned) MPI_Comm_free(&c);
    for (MPI_Comm& c : comms_) c = base_;
  }

  absl::StatusOr<MPI_Comm> Comm(int axes) const {
    if (axes < 1 || axes >= kMaskCount)
      return absl::InvalidArgumentError(absl::StrCat("bad mesh axes mask ", axes));
    return comms_[axes];
  }

  absl::StatusOr<int> StartAllReduceSum(int axes, float* data, int64_t count) override {
    STEPC_ASSIGN_OR_RETURN(MPI_Comm comm, Comm(axes));
    STEPC_ASSIGN_OR_RETURN(int n, Count(count));
    MPI_Request request;
    STEPC_MPI_RETURN_IF_ERROR(
        MPI_Iallreduce(MPI_IN_PLACE, data, n, MPI_FLOAT, MPI_SUM, comm, &request));
    return Track(request);
  }

  absl::StatusOr<int> StartAllGather(int axes, const float* send, float* recv,
                                     int64_t count) override {
    STEPC_ASSIGN_OR_RETURN(MPI_Comm comm, Comm(axes));
    STEPC_ASSIGN_OR_RETURN(int n, Count(count));
    MPI_Request request;
    STEPC_MPI_RETURN_IF_ERROR(
        MPI_Iallgather(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, comm, &request));
    return Track(request);
  }

  absl::StatusOr<int> StartReduceScatterSum(int axes, const float* send, float* recv,
                                            int64_t count) override {
    STEPC_ASSIGN_OR_RETURN(MPI_Comm comm, Comm(axes));
    STEPC_ASSIGN_OR_RETURN(int n, Count(count));
    MPI_Request request;
    STEPC_MPI_RETURN_IF_ERROR(
        MPI_Ireduce_scatter_block(send, recv, n, MPI_FLOAT, MPI_SUM, comm, &request));
    return Track(request);
  }

  absl::StatusOr<int> StartAllToAll(int axes, const float* send, float* recv,
                                    int64_t count) override {
    STEPC_ASSIGN_OR_RETURN(MPI_Comm comm, Comm(axes));
    STEPC_ASSIGN_OR_RETURN(int n, Count(count));
    MPI_Request request;
    STEPC_MPI_RETURN_IF_ERROR(
        MPI_Ialltoall(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, comm, &request));
    return Track(request);
  }

  absl::StatusOr<int> StartSend(int peer, int tag, const void* data, int64_t bytes) override {
    STEPC_RETURN_IF_ERROR(CheckTransfer(peer, tag, bytes));
    MPI_Request request;
    STEPC_MPI_RETURN_IF_ERROR(MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, peer,
                                        ordered_ ? 0 : tag, base_, &request));
    return Track(request);
  }

  absl::StatusOr<int> StartRecv(int peer, int tag, void* data, int64_t bytes) override {
    STEPC_RETURN_IF_ERROR(CheckTransfer(peer, tag, bytes));
    MPI_Request request;
    STEPC_MPI_RETURN_IF_ERROR(MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, peer,
                                        ordered_ ? 0 : tag, base_, &request));
    return Track(request);
  }

  absl::Status Wait(int request) override {
    if (request < 0 || request >= static_cast<int>(requests_.size()) ||
        requests_[request] == MPI_REQUEST_NULL)
      return absl::InvalidArgumentError(absl::StrCat("no pending collective ", request));
    STEPC_MPI_RETURN_IF_ERROR(MPI_Wait(&requests_[request], MPI_STATUS_IGNORE));
    free_.push_back(request);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<uint64_t>> AllGather(uint64_t value) override {
    std::vector<uint64_t> all(size_);
    STEPC_MPI_RETURN_IF_ERROR(MPI_Allgather(&value, 1, MPI_UINT64_T, all.data(), 1,
                                            MPI_UINT64_T, base_));
    return all;
  }

 private:
  absl::Status CheckTransfer(int peer, int tag, int64_t bytes) const {
    int* upper = nullptr;
    int found = 0;
    MPI_Comm_get_attr(base_, MPI_TAG_UB, &upper, &found);
    if (peer < 0 || peer >= size_ || peer == rank_ || tag < 0 ||
        (found && upper && tag > *upper) || bytes < 0 || bytes > INT32_MAX)
      return absl::InvalidArgumentError(absl::StrCat(
          "bad point-to-point transfer: peer ", peer, " of ", size_, " ranks (this is ", rank_,
          "), tag ", tag, ", ", bytes, " bytes"));
    return absl::OkStatus();
  }

  bool ordered_ = false;
  // A request id for Wait; ids of completed requests are reused.
  int Track(MPI_Request request) {
    if (!free_.empty()) {
      int id = free_.back();
      free_.pop_back();
      requests_[id] = request;
      return id;
    }
    requests_.push_back(request);
    return static_cast<int>(requests_.size()) - 1;
  }

  MPI_Comm base_;
  int rank_, size_;
  MPI_Comm comms_[kMaskCount];  // indexed by axes mask
  std::vector<MPI_Request> requests_;
  std::vector<int> free_;
};

bool Launched() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(var)) return true;
  return false;
}

}  // namespace

absl::StatusOr<bool> MpiInitIfLaunched(int* argc, char*** argv) {
  if (!Launched()) return false;
  STEPC_MPI_RETURN_IF_ERROR(MPI_Init(argc, argv));
  STEPC_MPI_RETURN_IF_ERROR(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  return true;
}

bool MpiInitialized() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

void MpiFinalize() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

void MpiAbort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

absl::StatusOr<std::unique_ptr<Communicator>> MakeMpiWorldCommunicator() {
  int rank = 0, size = 1;
  STEPC_MPI_RETURN_IF_ERROR(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  STEPC_MPI_RETURN_IF_ERROR(MPI_Comm_size(MPI_COMM_WORLD, &size));
  std::unique_ptr<Communicator> comm =
      std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, rank, size);
  return comm;
}

absl::StatusOr<std::unique_ptr<Communicator>> MakeMpiCommunicator(const void* mpi_comm) {
  if (!mpi_comm) return absl::InvalidArgumentError("the host's MPI communicator is NULL");
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return absl::FailedPreconditionError(
        "a host's MPI communicator needs MPI initialised by the host (MPI_Init) and not "
        "finalised");
  const MPI_Comm host = *static_cast<const MPI_Comm*>(mpi_comm);
  if (host == MPI_COMM_NULL) return absl::InvalidArgumentError("the host's MPI communicator is MPI_COMM_NULL");
  // Our own duplicate: the runtime's collectives never match the host's
  // messages, and its error handler is ours to set.
  MPI_Comm base;
  STEPC_MPI_RETURN_IF_ERROR(MPI_Comm_dup(host, &base));
  int rank = 0, size = 1;
  if (MPI_Comm_set_errhandler(base, MPI_ERRORS_RETURN) != MPI_SUCCESS ||
      MPI_Comm_rank(base, &rank) != MPI_SUCCESS || MPI_Comm_size(base, &size) != MPI_SUCCESS) {
    MPI_Comm_free(&base);
    return absl::InternalError("cannot set up a duplicate of the host's MPI communicator");
  }
  std::unique_ptr<Communicator> comm = std::make_unique<MpiCommunicator>(base, rank, size);
  return comm;
}

}  // namespace stepc
