#include "runtime/communicator.h"

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
}

int Communicator::AllGatherThunk(void* ctx, int32_t axes, const float* send, float* recv,
                                 int64_t count) {
  auto* self = static_cast<Communicator*>(ctx);
  self->last_error_ = self->AllGather(axes, send, recv, count);
  return self->last_error_.ok() ? 0 : 1;
}

int Communicator::ReduceScatterThunk(void* ctx, int32_t axes, const float* send, float* recv,
                                     int64_t count) {
  auto* self = static_cast<Communicator*>(ctx);
  self->last_error_ = self->ReduceScatterSum(axes, send, recv, count);
  return self->last_error_.ok() ? 0 : 1;
}

int Communicator::AllReduceThunk(void* ctx, int32_t axes, float* data, int64_t count) {
  auto* self = static_cast<Communicator*>(ctx);
  self->last_error_ = self->AllReduceSum(axes, data, count);
  return self->last_error_.ok() ? 0 : 1;
}

namespace {

class LocalCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  absl::Status SetMesh(int, int) override { return absl::OkStatus(); }
  absl::Status AllReduceSum(int, float*, int64_t) override { return absl::OkStatus(); }
  absl::Status AllGather(int, const float* send, float* recv, int64_t count) override {
    std::copy(send, send + count, recv);
    return absl::OkStatus();
  }
  absl::Status ReduceScatterSum(int, const float* send, float* recv, int64_t count) override {
    std::copy(send, send + count, recv);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<uint64_t>> AllGather(uint64_t value) override {
    return std::vector<uint64_t>{value};
  }
};

}  // namespace

std::unique_ptr<Communicator> MakeLocalCommunicator() {
  return std::make_unique<LocalCommunicator>();
}

}  // namespace stepc
