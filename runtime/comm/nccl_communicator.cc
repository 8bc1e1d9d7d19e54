#include "runtime/comm/nccl_communicator.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/device/cuda_status.h"
#include "runtime/device/local_device.h"
#include "runtime/comm/mpi_status.h"
#include "runtime/comm/nccl_status.h"
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
    for (auto* links : {&sends_, &receives_})
      for (auto& [peer, link] : *links) {
        if (link.comm) ncclCommDestroy(link.comm);
        if (link.stream) cudaStreamDestroy(link.stream);
      }
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

  // Point-to-point (pipeline stages). NCCL runs a communicator's operations
  // one after another and a send waits for its receive: on one
  // communicator per pair, a stage sending an activation while its peer
  // sends it a gradient would wait forever. So each direction of a pair has
  // a communicator and a stream of its own: a direction's transfers match by
  // their order (the tag is not sent: step-pipeline-stages orders each
  // pair's sends as the peer receives them, checked on the CPU by
  // STEPC_MPI_P2P_ORDERED), and opposite transfers progress side by side,
  // as MPI's do.
  absl::Status ConnectPeers(const std::vector<int>& peers) override {
    // Every rank makes its pairs' links in one global order (the lower rank,
    // then the higher): no two ranks each wait for the other's next pair.
    std::vector<std::pair<int, int>> pairs;
    for (int peer : peers) {
      if (peer < 0 || peer >= size_)
        return absl::InvalidArgumentError(absl::StrCat("no rank ", peer, " to connect to"));
      if (peer != rank_) pairs.push_back({std::min(peer, rank_), std::max(peer, rank_)});
    }
    std::sort(pairs.begin(), pairs.end());
    pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
    for (auto [low, high] : pairs) {
      STEPC_RETURN_IF_ERROR(Connect(low, high));
      STEPC_RETURN_IF_ERROR(Connect(high, low));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int> StartSend(int peer, int, const void* data, int64_t bytes) override {
    STEPC_ASSIGN_OR_RETURN(Link link, LinkTo(sends_, peer, "send to"));
    STEPC_RETURN_IF_ERROR(AfterCompute(link.stream));
    STEPC_NCCL_RETURN_IF_ERROR(ncclSend(data, bytes, ncclUint8, 1, link.comm, link.stream));
    return Record(link.stream);
  }

  absl::StatusOr<int> StartRecv(int peer, int, void* data, int64_t bytes) override {
    STEPC_ASSIGN_OR_RETURN(Link link, LinkTo(receives_, peer, "receive from"));
    STEPC_RETURN_IF_ERROR(AfterCompute(link.stream));
    STEPC_NCCL_RETURN_IF_ERROR(ncclRecv(data, bytes, ncclUint8, 0, link.comm, link.stream));
    return Record(link.stream);
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

  // A direction of a pair of ranks: a 2-rank communicator (the sender rank
  // 0) and the stream its transfers run on.
  struct Link {
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
  };

  // Makes the link from world rank `from` to `to` (this rank is one of
  // them): the sender draws the unique id and hands it over MPI.
  absl::Status Connect(int from, int to) {
    const bool sender = from == rank_;
    Link& link = sender ? sends_[to] : receives_[from];
    if (link.comm) return absl::OkStatus();
    ncclUniqueId id;
    constexpr int kLinkTag = 0x57E9;
    if (sender) {
      STEPC_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
      STEPC_MPI_RETURN_IF_ERROR(MPI_Send(&id, sizeof(id), MPI_BYTE, to, kLinkTag, base_));
    } else {
      STEPC_MPI_RETURN_IF_ERROR(
          MPI_Recv(&id, sizeof(id), MPI_BYTE, from, kLinkTag, base_, MPI_STATUS_IGNORE));
    }
    STEPC_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&link.stream, cudaStreamNonBlocking));
    STEPC_NCCL_RETURN_IF_ERROR(ncclCommInitRank(&link.comm, 2, id, sender ? 0 : 1));
    return absl::OkStatus();
  }

  absl::StatusOr<Link> LinkTo(const std::map<int, Link>& links, int peer, const char* what) const {
    auto it = links.find(peer);
    if (it == links.end() || !it->second.comm)
      return absl::FailedPreconditionError(absl::StrCat(
          "no NCCL link to ", what, " rank ", peer, " (the session connects a pipeline's stages)"));
    return it->second;
  }

  // The communication stream starts after the compute enqueued so far.
  absl::Status AfterCompute(cudaStream_t stream) {
    cudaEvent_t ready;
    STEPC_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    STEPC_CUDA_RETURN_IF_ERROR(cudaEventRecord(ready, compute_));
    STEPC_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, ready, 0));
    STEPC_CUDA_RETURN_IF_ERROR(cudaEventDestroy(ready));
    return absl::OkStatus();
  }
  absl::Status AfterCompute() { return AfterCompute(stream_); }

  absl::StatusOr<int> Record() { return Record(stream_); }
  absl::StatusOr<int> Record(cudaStream_t stream) {
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
    STEPC_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[id], stream));
    return id;
  }

  MPI_Comm base_;
  int rank_, size_;
  cudaStream_t compute_ = nullptr, stream_ = nullptr;
  ncclComm_t comms_[kMaskCount] = {};  // by axes mask
  int mesh_axes_ = 1;
  std::map<int, Link> sends_, receives_;  // by the peer's world rank
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
