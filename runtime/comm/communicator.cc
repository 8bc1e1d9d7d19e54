#include "runtime/comm/communicator.h"

#include <time.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace stepc {

Communicator::Communicator() {
  table_.ctx = this;
  table_.rank = 0;
  table_.size = 1;
  table_.all_reduce_sum = &Communicator::AllReduceThunk;
  table_.all_gather = &Communicator::AllGatherThunk;
  table_.reduce_scatter_sum = &Communicator::ReduceScatterThunk;
  table_.all_to_all = &Communicator::AllToAllThunk;
  table_.wait = &Communicator::WaitThunk;
  table_.send = &Communicator::SendThunk;
  table_.recv = &Communicator::RecvThunk;
}

absl::StatusOr<int> Communicator::StartSend(int peer, int, const void*, int64_t) {
  return absl::UnimplementedError(
      absl::StrCat("this communicator has no point-to-point transfers (a send to rank ", peer,
                   "): a pipeline-parallel step needs MPI"));
}

absl::StatusOr<int> Communicator::StartRecv(int peer, int, void*, int64_t) {
  return absl::UnimplementedError(
      absl::StrCat("this communicator has no point-to-point transfers (a receive from rank ",
                   peer, "): a pipeline-parallel step needs MPI"));
}

int Communicator::Keep(absl::StatusOr<int> request, int32_t* out) {
  last_error_ = request.status();
  if (!request.ok()) return 1;
  *out = *request;
  return 0;
}

namespace {
// The trace's clock (CLOCK_MONOTONIC).
double Now() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
}  // namespace

void Communicator::Started(const char* kind, int axes, int64_t count, double since,
                           int request) {
  const int mask = axes >= 0 && axes < kMaskCount ? axes : 0;
  times_.seconds[mask] += Now() - since;
  if (request < 0) return;
  times_.calls[mask] += 1;
  if (request >= static_cast<int>(request_axes_.size())) {
    request_axes_.resize(request + 1, 0);
    request_record_.resize(request + 1, -1);
  }
  request_axes_[request] = mask;
  request_record_[request] = -1;
  if (!recording_) return;
  request_record_[request] = static_cast<int>(records_.size());
  records_.push_back(CollectiveRecord{kind, mask, count, since});
}

void Communicator::Waited(int request, double since) {
  const bool known = request >= 0 && request < static_cast<int>(request_axes_.size());
  const double now = Now();
  times_.seconds[known ? request_axes_[request] : 0] += now - since;
  if (!known || !recording_) return;
  const int record = request_record_[request];
  if (record >= 0 && record < static_cast<int>(records_.size())) {
    records_[record].wait_begin = since;
    records_[record].wait_end = now;
  }
  request_record_[request] = -1;
}

int Communicator::AllReduceThunk(void* ctx, int32_t axes, float* data, int64_t count,
                                 int32_t* request) {
  auto* self = static_cast<Communicator*>(ctx);
  const double since = Now();
  const int failed = self->Keep(self->StartAllReduceSum(axes, data, count), request);
  self->Started("all_reduce", axes, count, since, failed ? -1 : *request);
  return failed;
}

int Communicator::AllGatherThunk(void* ctx, int32_t axes, const float* send, float* recv,
                                 int64_t count, int32_t* request) {
  auto* self = static_cast<Communicator*>(ctx);
  const double since = Now();
  const int failed = self->Keep(self->StartAllGather(axes, send, recv, count), request);
  self->Started("all_gather", axes, count, since, failed ? -1 : *request);
  return failed;
}

int Communicator::ReduceScatterThunk(void* ctx, int32_t axes, const float* send, float* recv,
                                     int64_t count, int32_t* request) {
  auto* self = static_cast<Communicator*>(ctx);
  const double since = Now();
  const int failed = self->Keep(self->StartReduceScatterSum(axes, send, recv, count), request);
  self->Started("reduce_scatter", axes, count, since, failed ? -1 : *request);
  return failed;
}

int Communicator::AllToAllThunk(void* ctx, int32_t axes, const float* send, float* recv,
                                int64_t count, int32_t* request) {
  auto* self = static_cast<Communicator*>(ctx);
  const double since = Now();
  const int failed = self->Keep(self->StartAllToAll(axes, send, recv, count), request);
  // Recorded as the rank's whole send buffer (count floats to each peer).
  self->Started("all_to_all", axes, count * self->Ranks(axes), since, failed ? -1 : *request);
  return failed;
}

// A transfer is charged to the whole world (axis mask 0 is no collective's).
int Communicator::SendThunk(void* ctx, int32_t peer, int32_t tag, const void* data,
                            int64_t bytes, int32_t* request) {
  auto* self = static_cast<Communicator*>(ctx);
  const double since = Now();
  const int failed = self->Keep(self->StartSend(peer, tag, data, bytes), request);
  self->Started("send", 0, bytes / 4, since, failed ? -1 : *request);
  return failed;
}

int Communicator::RecvThunk(void* ctx, int32_t peer, int32_t tag, void* data, int64_t bytes,
                            int32_t* request) {
  auto* self = static_cast<Communicator*>(ctx);
  const double since = Now();
  const int failed = self->Keep(self->StartRecv(peer, tag, data, bytes), request);
  self->Started("recv", 0, bytes / 4, since, failed ? -1 : *request);
  return failed;
}

int Communicator::WaitThunk(void* ctx, int32_t request) {
  auto* self = static_cast<Communicator*>(ctx);
  const double since = Now();
  self->last_error_ = self->Wait(request);
  self->Waited(request, since);
  return self->last_error_.ok() ? 0 : 1;
}

absl::Status Communicator::AllReduceSum(int axes, float* data, int64_t count) {
  absl::StatusOr<int> request = StartAllReduceSum(axes, data, count);
  return request.ok() ? Wait(*request) : request.status();
}

absl::Status Communicator::AllGather(int axes, const float* send, float* recv, int64_t count) {
  absl::StatusOr<int> request = StartAllGather(axes, send, recv, count);
  return request.ok() ? Wait(*request) : request.status();
}

int MeshCoordinate(const std::vector<int>& shape, int rank, int axis) {
  int stride = 1;
  for (size_t a = axis + 1; a < shape.size(); ++a) stride *= shape[a];
  return rank / stride % shape[axis];
}

std::vector<MeshSplit> MeshSplits(const std::vector<int>& shape, int rank) {
  std::vector<MeshSplit> splits;
  const int axes = static_cast<int>(shape.size());
  for (int mask = 1; mask < (1 << axes); ++mask) {
    int color = 0;
    for (int a = 0; a < axes; ++a)
      if (!(mask >> a & 1)) color = color * shape[a] + MeshCoordinate(shape, rank, a);
    splits.push_back({mask, color});
  }
  return splits;
}

std::vector<int> AxisPeers(const std::vector<int>& shape, int rank, int axis) {
  int stride = 1;
  for (size_t a = axis + 1; a < shape.size(); ++a) stride *= shape[a];
  const int base = rank - MeshCoordinate(shape, rank, axis) * stride;
  std::vector<int> peers;
  for (int i = 0; i < shape[axis]; ++i)
    if (base + i * stride != rank) peers.push_back(base + i * stride);
  return peers;
}

namespace {

class LocalCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  absl::Status SetMesh(const std::vector<int>&) override { return absl::OkStatus(); }
  absl::StatusOr<int> StartAllReduceSum(int, float*, int64_t) override { return 0; }
  absl::StatusOr<int> StartAllGather(int, const float* send, float* recv,
                                     int64_t count) override {
    std::copy(send, send + count, recv);
    return 0;
  }
  absl::StatusOr<int> StartReduceScatterSum(int, const float* send, float* recv,
                                            int64_t count) override {
    std::copy(send, send + count, recv);
    return 0;
  }
  absl::StatusOr<int> StartAllToAll(int, const float* send, float* recv,
                                    int64_t count) override {
    std::copy(send, send + count, recv);
    return 0;
  }
  absl::Status Wait(int) override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<uint64_t>> AllGather(uint64_t value) override {
    return std::vector<uint64_t>{value};
  }
};

}  // namespace

std::unique_ptr<Communicator> MakeLocalCommunicator() {
  return std::make_unique<LocalCommunicator>();
}

}  // namespace stepc
