// A training job's evaluation: the mean loss of the same validation batches
// each time, with the forward-only step, and a classifier's accuracy.

#ifndef STEPC_RUNTIME_TRAIN_EVALUATION_H_
#define STEPC_RUNTIME_TRAIN_EVALUATION_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/comm/communicator.h"
#include "runtime/session/module.h"
#include "runtime/session/session.h"
#include "runtime/train/data_source.h"
#include "runtime/train/options.h"

namespace stepc {

struct Evaluation {
  double loss = 0;
  bool has_accuracy = false;
  double accuracy = 0;  // over the global batches
  int64_t batches = 0;
  double seconds = 0;
};

class Evaluator {
 public:
  Evaluator(const TrainOptions& o, const Module& module, const DataSource& data);
  // Whether the run evaluates at all (a validation set was given).
  bool enabled() const;
  // Collective: every rank evaluates its rows of the same batches.
  absl::StatusOr<Evaluation> Run(Session& session, Communicator& comm, DataSource& data,
                                 uint64_t seed) const;

 private:
  int64_t eval_batches_;
  bool enabled_;
  // A classifier's accuracy: its logits [rows, classes] against the integer
  // input the cross-entropy reads, named 'labels' or 'targets'.
  bool accuracy_ = false;
  std::string labels_;
};

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_EVALUATION_H_
