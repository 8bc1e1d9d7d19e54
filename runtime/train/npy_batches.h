// Batches of any model's inputs from .npy files (stepc-run --batch-npy,
// --val-batch-npy): every input by its name, integer or float, any rank.

#ifndef STEPC_RUNTIME_TRAIN_NPY_BATCHES_H_
#define STEPC_RUNTIME_TRAIN_NPY_BATCHES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/session/session.h"

namespace stepc {

// One batch: this rank's rows of every input of the step, in the order of
// the module's argument table.
struct InputBatch {
  std::vector<std::string> names;
  std::vector<std::vector<int32_t>> ints;    // per input (empty if float)
  std::vector<std::vector<float>> floats;    // per input (empty if integer)
};

class NpyBatches {
 public:
  // `dir` holding DIR/<input>.npy for every input (one batch, every step),
  // or subdirectories that each do (a stream of batches in name order,
  // cycled). Each array has the step's shape or, under sharding, the global
  // batch's (dim 0 × world), of which this rank takes its rows; integer
  // inputs need integer arrays in [0, 2^31). Checks the first batch.
  static absl::StatusOr<NpyBatches> Open(const std::string& dir, const Module& module, int rank,
                                         int world);
  // Batches in the stream (1 for a fixed batch).
  int64_t count() const { return static_cast<int64_t>(dirs_.size()); }
  // Reads batch `index` (cycled), checked as Open checks the first.
  absl::StatusOr<InputBatch> Load(int64_t index) const;
  // The batch directories' names and every file's size and first batch:
  // what a checkpoint remembers of the data.
  uint64_t Fingerprint() const { return fingerprint_; }
  const std::string& source() const { return source_; }

 private:
  const Module* module_ = nullptr;
  int rank_ = 0, world_ = 1;
  std::vector<std::string> dirs_;
  std::string source_;
  uint64_t fingerprint_ = 0;
};

// Sets every input of `batch` on the session.
absl::Status SetBatch(Session& session, const InputBatch& batch);

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_NPY_BATCHES_H_
