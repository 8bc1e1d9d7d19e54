#include "runtime/nccl_communicator.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/cuda_status.h"
#include "runtime/local_device.h"
#include "runtime/mpi_status.h"
#include "runtime/nccl_status.h"
#include "runtime/status_macros.h"

namespace stepc {
namespace {

class NcclCommunicator : public Communicator {
 public:
  // `base`: MPI_COMM_WORLD or a duplicate this communicator owns.
  NcclCommunicator(MPI_Comm base, int rank, int size, cudaStream_t compute)
      : base_(base), rank_(rank), size_(size), compute_(compute) {}
  ~NcclCommunicator() override {
    for (ncclComm_t c : comms_)
      if (c) ncclCommDestroy(c);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    if (stream_) cudaStreamDestroy(stream_);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && base_ != MPI_COMM_WORLD) MPI_Comm_free(&base_);
  }
  const void* mpi_comm() const override { return &base_; }

  absl::Status Init() {
    int devices = 0;
    STEPC_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&devices));
    if (devices == 0) return absl::FailedPreconditionError("no CUDA device for NCCL");
    // The GPU the CUDA device layer chose (cuda_device.cc): one rule.
    STEPC_CUDA_RETURN_IF_ERROR(cudaSetDevice(LocalDeviceOrdinal(devices)));
    STEPC_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    return SetMesh({size_});
  }

  int rank() const override { return rank_; }
  int Ranks(int axes) const override {
    absl::StatusOr<ncclComm_t> comm = Comm(axes);
    int n = 0;
    if (comm.ok()) ncclCommCount(*comm, &n);
    return n;
  }
  int size() const override { return size_; }

  // One NCCL communicator per mask over the mesh's axes, each bootstrapped
  // by rank 0 of its MPI sub-communicator broadcasting the unique id.
  absl::Status SetMesh(const std::vector<int>& shape) override {
    int64_t ranks = 1;
    for (int n : shape) ranks *= n;
    if (shape.empty() || shape.size() > static_cast<size_t>(kMaxMeshAxes) || ranks != size_)
      return absl::InvalidArgumentError(absl::StrCat("a mesh of ", absl::StrJoin(shape, "x"),
                                                     " does not hold ", size_, " ranks"));
    for (ncclComm_t& c : comms_)
      if (c) {
        ncclCommDestroy(c);
        c = nullptr;
      }
    mesh_axes_ = static_cast<int>(shape.size());
    for (const MeshSplit& split : MeshSplits(shape, rank_)) {
      MPI_Comm sub;
      STEPC_MPI_RETURN_IF_ERROR(MPI_Comm_split(base_, split.color, rank_, &sub));
      int sub_rank = 0, sub_size = 1;
      MPI_Comm_rank(sub, &sub_rank);
      MPI_Comm_size(sub, &sub_size);
      ncclUniqueId id;
      if (sub_rank == 0) STEPC_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
      STEPC_MPI_RETURN_IF_ERROR(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, sub));
      MPI_Comm_free(&sub);
      STEPC_NCCL_RETURN_IF_ERROR(ncclCommInitRank(&comms_[split.mask], sub_size, id, sub_rank));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int> StartAllReduceSum(int axes, float* data, int64_t count) override {
    STEPC_ASSIGN_OR_RETURN(ncclComm_t comm, Comm(axes));
    STEPC_RETURN_IF_ERROR(AfterCompute());
    STEPC_NCCL_RETURN_IF_ERROR(
        ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm, stream_));
    return Record();
  }

  absl::StatusOr<int> StartAllGather(int axes, const float* send, float* recv,
                                     int64_t count) override {
    STEPC_ASSIGN_OR_RETURN(ncclComm_t comm, Comm(axes));
    STEPC_RETURN_IF_ERROR(AfterCompute());
    STEPC_NCCL_RETURN_IF_ERROR(ncclAllGather(send, recv, count, ncclFloat32, comm, stream_));
    return Record();
  }

  absl::StatusOr<int> StartReduceScatterSum(int axes, const float* send, float* recv,
                                            int64_t count) override {
    STEPC_ASSIGN_OR_RETURN(ncclComm_t comm, Comm(axes));
    STEPC_RETURN_IF_ERROR(AfterCompute());
    STEPC_NCCL_RETURN_IF_ERROR(
        ncclReduceScatter(send, recv, count, ncclFloat32, ncclSum, comm, stream_));
    return Record();
  }

  // NCCL has no all-to-all: one send and one receive per peer, grouped.
  absl::StatusOr<int> StartAllToAll(int axes, const float* send, float* recv,
                                    int64_t count) override {
    STEPC_ASSIGN_OR_RETURN(ncclComm_t comm, Comm(axes));
    int peers = 0;
    STEPC_NCCL_RETURN_IF_ERROR(ncclCommCount(comm, &peers));
    STEPC_RETURN_IF_ERROR(AfterCompute());
    STEPC_NCCL_RETURN_IF_ERROR(ncclGroupStart());
    for (int peer = 0; peer < peers; ++peer) {
      ncclResult_t sent = ncclSend(send + peer * count, count, ncclFloat32, peer, comm, stream_);
      ncclResult_t received =
          ncclRecv(recv + peer * count, count, ncclFloat32, peer, comm, stream_);
      if (sent != ncclSuccess || received != ncclSuccess) {
        ncclGroupEnd();
        STEPC_NCCL_RETURN_IF_ERROR(sent != ncclSuccess ? sent : received);
      }
    }
    STEPC_NCCL_RETURN_IF_ERROR(ncclGroupEnd());
    return Record();
  }

  // The compute stream waits for the collective; the host does not.
  absl::Status Wait(int request) override {
    if (request < 0 || request >= static_cast<int>(events_.size()))
      return absl::InvalidArgumentError(absl::StrCat("no pending collective ", request));
    STEPC_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(compute_, events_[request], 0));
    free_.push_back(request);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<uint64_t>> AllGather(uint64_t value) override {
    std::vector<uint64_t> all(size_);
    STEPC_MPI_RETURN_IF_ERROR(MPI_Allgather(&value, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T,
                                  base_));
    return all;
  }

 private:
  absl::StatusOr<ncclComm_t> Comm(int axes) const {
    // Axes past the mesh's join nothing more.
    if (axes >= 1 && axes < kMaskCount) axes &= (1 << mesh_axes_) - 1;
    if (axes < 1 || axes >= kMaskCount || !comms_[axes])
      return absl::InvalidArgumentError(absl::StrCat("bad mesh axes mask ", axes));
    return comms_[axes];
  }

  // The communication stream starts after the compute enqueued so far.
  absl::Status AfterCompute() {
    cudaEvent_t ready;
    STEPC_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    STEPC_CUDA_RETURN_IF_ERROR(cudaEventRecord(ready, compute_));
    STEPC_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream_, ready, 0));
    STEPC_CUDA_RETURN_IF_ERROR(cudaEventDestroy(ready));
    return absl::OkStatus();
  }

  absl::StatusOr<int> Record() {
    int id;
    if (!free_.empty()) {
      id = free_.back();
      free_.pop_back();
    } else {
      cudaEvent_t e;
      STEPC_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      events_.push_back(e);
      id = static_cast<int>(events_.size()) - 1;
    }
    STEPC_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[id], stream_));
    return id;
  }

  MPI_Comm base_;
  int rank_, size_;
  cudaStream_t compute_ = nullptr, stream_ = nullptr;
  ncclComm_t comms_[kMaskCount] = {};  // by axes mask
  int mesh_axes_ = 1;
  std::vector<cudaEvent_t> events_;
  std::vector<int> free_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> MakeNcclCommunicator(void* compute_stream,
                                                                   const void* mpi_comm) {
  // A host's communicator is duplicated: it may be freed before this one.
  MPI_Comm base = MPI_COMM_WORLD;
  if (mpi_comm) STEPC_MPI_RETURN_IF_ERROR(MPI_Comm_dup(*static_cast<const MPI_Comm*>(mpi_comm), &base));
  int rank = 0, size = 1;
  STEPC_MPI_RETURN_IF_ERROR(MPI_Comm_rank(base, &rank));
  STEPC_MPI_RETURN_IF_ERROR(MPI_Comm_size(base, &size));
  auto comm = std::make_unique<NcclCommunicator>(base, rank, size,
                                                 static_cast<cudaStream_t>(compute_stream));
  STEPC_RETURN_IF_ERROR(comm->Init());
  return std::unique_ptr<Communicator>(std::move(comm));
}

}  // namespace stepc

// What libstepc_runtime_cuda.so loads (dlopen) for a multi-GPU step, so
// that single-GPU runs never need libnccl.
extern "C" stepc::Communicator* stepc_make_nccl_communicator_v2(void* compute_stream,
                                                                const void* mpi_comm,
                                                                char* error,
                                                                size_t error_len) {
  absl::StatusOr<std::unique_ptr<stepc::Communicator>> comm =
      stepc::MakeNcclCommunicator(compute_stream, mpi_comm);
  if (!comm.ok()) {
    std::snprintf(error, error_len, "%s", std::string(comm.status().message()).c_str());
    return nullptr;
  }
  return comm->release();
}
