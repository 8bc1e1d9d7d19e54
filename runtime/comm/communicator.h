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

// Collectives span mesh axes, as a bit mask (bit a: axis a): kAxis0 (across
// replica groups in hsdp; the whole world for a 1-axis mesh), kAxis1 (within
// a group), kAxis2 (the tp axis of hsdp with tp), or several. A mesh has at
// most kMaxMeshAxes axes, so masks are below kMaskCount.
constexpr int kAxis0 = 1, kAxis1 = 2, kAxis2 = 4, kAllAxes = 7;
constexpr int kMaxMeshAxes = 4, kMaskCount = 1 << kMaxMeshAxes;

// How a rank joins the sub-communicator of each mask over a row-major mesh
// of `shape` (rank = Σ coordinate_a · stride_a): the ranks that agree on
// every coordinate outside the mask share a color.
struct MeshSplit {
  int mask, color;
};
std::vector<MeshSplit> MeshSplits(const std::vector<int>& shape, int rank);
// The coordinate of `rank` along `axis` of a row-major mesh of `shape`.
int MeshCoordinate(const std::vector<int>& shape, int rank, int axis);
// The other ranks along `axis` (those that agree with `rank` on every other
// coordinate), in rank order: a pipeline rank's peers along the stage axis.
std::vector<int> AxisPeers(const std::vector<int>& shape, int rank, int axis);

class Communicator {
 public:
  Communicator();
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Arranges the ranks as a row-major mesh of `shape` (at most kMaxMeshAxes
  // axes, their product the world; e.g. [groups, per_group]: rank =
  // g·per_group + i). Before it, the mesh is [size].
  virtual absl::Status SetMesh(const std::vector<int>& shape) = 0;
  // The collectives start asynchronously and return a request for Wait;
  // the buffers must stay untouched until then.
  // data[0..count) = Σ over the ranks of `axes`, in place.
  virtual absl::StatusOr<int> StartAllReduceSum(int axes, float* data, int64_t count) = 0;
  // recv = the concatenation of the sends along `axes` (count floats each).
  virtual absl::StatusOr<int> StartAllGather(int axes, const float* send, float* recv,
                                             int64_t count) = 0;
  // recv = Σ along `axes` of each rank's block at this rank's index.
  virtual absl::StatusOr<int> StartReduceScatterSum(int axes, const float* send, float* recv,
                                                    int64_t count) = 0;
  // recv block i (count floats) = block j of rank i's send along `axes`, j
  // this rank's index.
  virtual absl::StatusOr<int> StartAllToAll(int axes, const float* send, float* recv,
                                            int64_t count) = 0;
  // Point-to-point (pipeline stages): `bytes` bytes to or from world rank
  // `peer`, matched by `tag`. Only a multi-rank communicator has them.
  virtual absl::StatusOr<int> StartSend(int peer, int tag, const void* data, int64_t bytes);
  virtual absl::StatusOr<int> StartRecv(int peer, int tag, void* data, int64_t bytes);
  // Prepares transfers with `peers` (world ranks) before the first step;
  // every rank calls it with its own peers (a peer calls it with this
  // rank among its). MPI connects on demand; NCCL's links are made here.
  virtual absl::Status ConnectPeers(const std::vector<int>& peers) { return absl::OkStatus(); }
  virtual absl::Status Wait(int request) = 0;
  // Blocking forms.
  absl::Status AllReduceSum(int axes, float* data, int64_t count);
  absl::Status AllGather(int axes, const float* send, float* recv, int64_t count);
  // Every rank's `value`, in rank order.
  virtual absl::StatusOr<std::vector<uint64_t>> AllGather(uint64_t value) = 0;
  // The MPI_Comm (as `const MPI_Comm*`) this communicator runs over, from
  // which a device communicator (NCCL) is bootstrapped; null: not MPI (one
  // rank), and the world serves.
  virtual const void* mpi_comm() const { return nullptr; }

  // Ranks along `axes` (this rank's sub-communicator of the mask).
  virtual int Ranks(int axes) const { return axes >= 1 ? 1 : 0; }

  // Host seconds spent in the collectives a step.so started through the
  // table (start calls and waits) since ResetTimes, per axes mask: on the
  // CPU the time the step waited for communication (MPI progresses its
  // nonblocking collectives inside its calls); on a GPU only the enqueueing.
  struct Times {
    double seconds[kMaskCount] = {};
    int64_t calls[kMaskCount] = {};
  };
  const Times& times() const { return times_; }
  void ResetTimes() { times_ = Times{}; }

  // While recording (stepc-run --trace), each collective the table starts:
  // its kind, axes and floats per rank (an all-to-all's: its whole send
  // buffer, every peer's block), and the CLOCK_MONOTONIC seconds it
  // was issued at and its wait began and ended at (0: not waited for yet).
  struct CollectiveRecord {
    const char* kind;
    int axes;
    int64_t count;
    double issued, wait_begin = 0, wait_end = 0;
  };
  void RecordCollectives(bool on) {
    recording_ = on;
    records_.clear();
  }
  std::vector<CollectiveRecord> TakeCollectiveRecords() {
    recording_ = false;
    return std::move(records_);
  }

  // The C table a step.so calls; its failures keep their status here.
  const stepc_collectives* table() {
    table_.rank = rank();
    table_.size = size();
    return &table_;
  }
  const absl::Status& last_error() const { return last_error_; }

 private:
  static int AllReduceThunk(void* ctx, int32_t axes, float* data, int64_t count,
                            int32_t* request);
  static int AllGatherThunk(void* ctx, int32_t axes, const float* send, float* recv,
                            int64_t count, int32_t* request);
  static int ReduceScatterThunk(void* ctx, int32_t axes, const float* send, float* recv,
                                int64_t count, int32_t* request);
  static int AllToAllThunk(void* ctx, int32_t axes, const float* send, float* recv,
                           int64_t count, int32_t* request);
  static int WaitThunk(void* ctx, int32_t request);
  static int SendThunk(void* ctx, int32_t peer, int32_t tag, const void* data, int64_t bytes,
                       int32_t* request);
  static int RecvThunk(void* ctx, int32_t peer, int32_t tag, void* data, int64_t bytes,
                       int32_t* request);
  int Keep(absl::StatusOr<int> request, int32_t* out);
  // A collective started at `since` (request < 0: it failed), and a wait
  // that began at `since`: their time is charged to the axes (and
  // recorded).
  void Started(const char* kind, int axes, int64_t count, double since, int request);
  void Waited(int request, double since);
  Times times_;
  // By request id: its axes, and its record (-1: none).
  std::vector<int> request_axes_, request_record_;
  bool recording_ = false;
  std::vector<CollectiveRecord> records_;
  stepc_collectives table_;
  absl::Status last_error_;
};

// A world of one rank: collectives are identities.
std::unique_ptr<Communicator> MakeLocalCommunicator();

// MPI. `MpiInitIfLaunched` initialises MPI when the process was started by a
// launcher (mpirun/srun: OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK set) and
// reports whether it did; `MpiFinalize` ends it.
absl::StatusOr<bool> MpiInitIfLaunched(int* argc, char*** argv);
// Whether MPI is initialised (by us or by a host) and not finalised.
bool MpiInitialized();
void MpiFinalize();
// Ends every rank of the job (a failed rank must not leave the others
// waiting in a collective).
[[noreturn]] void MpiAbort(int code);
absl::StatusOr<std::unique_ptr<Communicator>> MakeMpiWorldCommunicator();
// The ranks of a host's own communicator (`mpi_comm` points to its
// MPI_Comm), duplicated so that the runtime's collectives never match the
// host's messages. The host has initialised MPI (and finalises it).
absl::StatusOr<std::unique_ptr<Communicator>> MakeMpiCommunicator(const void* mpi_comm);

}  // namespace stepc

#endif  // STEPC_RUNTIME_COMMUNICATOR_H_
