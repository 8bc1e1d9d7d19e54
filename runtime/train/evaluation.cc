#include "runtime/train/evaluation.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "runtime/status_macros.h"

namespace stepc {
namespace {

// Counts the rows whose most likely class is their label, given this rank's
// logits [rows, classes] and labels; `correct` and `rows` are added to.
void CountCorrect(const std::vector<float>& logits, const std::vector<int32_t>& labels,
                  int64_t& correct, int64_t& rows) {
  const size_t classes = logits.size() / labels.size();
  for (size_t r = 0; r < labels.size(); ++r) {
    const float* row = logits.data() + r * classes;
    correct += std::max_element(row, row + classes) - row == labels[r];
    ++rows;
  }
}

}  // namespace

Evaluator::Evaluator(const TrainOptions& o, const Module& module, const DataSource& data)
    : eval_batches_(o.eval_batches), enabled_(data.validates()) {
  const stepc_module_info& info = module.info();
  int labels_arg = module.FindArg("labels");
  if (labels_arg < 0) labels_arg = module.FindArg("targets");
  accuracy_ = data.val_batches() && info.logits_rank == 2 && labels_arg >= 0 &&
              info.args[labels_arg].rank == 1 &&
              info.args[labels_arg].shape[0] == info.logits_shape[0];
  if (accuracy_) labels_ = info.args[labels_arg].name;
  if (data.val_batches()) eval_batches_ = std::min(eval_batches_, data.val_batches()->count());
}

bool Evaluator::enabled() const { return enabled_; }

absl::StatusOr<Evaluation> Evaluator::Run(Session& session, Communicator& comm, DataSource& data,
                                          uint64_t seed) const {
  const auto start = std::chrono::steady_clock::now();
  Evaluation e;
  e.batches = eval_batches_;
  e.has_accuracy = accuracy_;
  double sum = 0;
  if (data.val_batches()) {
    int64_t correct = 0, rows = 0;
    std::vector<float> logits;
    for (int64_t j = 0; j < eval_batches_; ++j) {
      STEPC_ASSIGN_OR_RETURN(const InputBatch b, data.val_batches()->Load(j));
      STEPC_RETURN_IF_ERROR(SetBatch(session, b));
      STEPC_ASSIGN_OR_RETURN(const float loss, session.Eval(accuracy_ ? &logits : nullptr));
      sum += loss;
      if (accuracy_)
        for (size_t k = 0; k < b.names.size(); ++k)
          if (b.names[k] == labels_) CountCorrect(logits, b.ints[k], correct, rows);
    }
    if (accuracy_) {
      // Every rank's count: the accuracy over the global batches.
      STEPC_ASSIGN_OR_RETURN(const std::vector<uint64_t> all_correct,
                             comm.AllGather(static_cast<uint64_t>(correct)));
      uint64_t total = 0;
      for (uint64_t c : all_correct) total += c;
      e.accuracy = double(total) / double(rows * comm.size());
    }
  } else {
    for (int64_t j = 1; j <= eval_batches_; ++j) {
      STEPC_RETURN_IF_ERROR(data.SetValidation(session, seed, j));
      STEPC_ASSIGN_OR_RETURN(const float loss, session.Eval());
      sum += loss;
    }
  }
  e.loss = sum / static_cast<double>(eval_batches_);
  e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return e;
}

}  // namespace stepc
