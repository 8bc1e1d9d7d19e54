// A training job's data: token data (a token file, a text corpus, the
// embedded corpus) or .npy batches for any model's inputs, the validation
// set, the character vocabulary, and the identity a checkpoint records so a
// resumed run refuses other data.

#ifndef STEPC_RUNTIME_TRAIN_DATA_SOURCE_H_
#define STEPC_RUNTIME_TRAIN_DATA_SOURCE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/formats/data.h"
#include "runtime/session/module.h"
#include "runtime/session/session.h"
#include "runtime/train/npy_batches.h"
#include "runtime/train/vocabulary.h"
#include "runtime/train/options.h"

namespace stepc {

class DataSource {
 public:
  // The training data the options name, as this rank of `world` (with the
  // module's tensor-parallel degree) reads it. `no_data`: a resumed run
  // with nothing left to train reads none.
  static absl::StatusOr<DataSource> Open(const TrainOptions& o, const Module& module, int rank,
                                         int world, bool no_data);
  // The validation set (--val-data, --val-fraction, --val-batch-npy);
  // after Open, once the ranks agree on the run.
  absl::Status OpenValidation(const TrainOptions& o, const Module& module);

  // Sets the inputs of training step `step` (1-based): this rank's rows of
  // the global batch drawn from (seed, step), or the step's .npy batch.
  absl::Status SetStep(Session& session, uint64_t seed, int64_t step);
  // Sets validation batch `j` (1-based) of an evaluation.
  absl::Status SetValidation(Session& session, uint64_t seed, int64_t j);

  // A checkpoint's trainer state written on other data is refused, naming
  // how the data differs (source and size, --val-fraction, contents).
  absl::Status CheckResumed(const nlohmann::json& trainer, const std::string& resume_dir) const;
  // What the checkpoint records: source, size, unit, split, fingerprint and
  // the character vocabulary.
  const nlohmann::json& identity() const { return identity_; }
  // "DIR (N batches)" or the token data's source, for the progress header.
  std::string Describe() const;

  bool language_model() const { return language_model_; }
  // Token data (empty for .npy batches); what the ranks' agreement hashes.
  const TokenData& tokens() const { return data_; }
  // The character vocabulary: --vocab's, else the corpus's (empty for token
  // files without --vocab and for .npy batches).
  const std::string& characters() const { return characters_; }
  // What a sample decodes with: the characters above, or --vocab's tokens.
  const Vocabulary& vocabulary() const { return vocabulary_; }
  bool validates() const { return validate_; }
  // .npy validation batches (a classifier's accuracy comes from them).
  const std::optional<NpyBatches>& val_batches() const { return val_batches_; }
  int64_t batch() const { return batch_; }
  int64_t seq() const { return seq_; }
  int64_t global_batch() const { return batch_ * data_world_; }
  int data_world() const { return data_world_; }
  // A rank's rows per step (the leading dimension of the first input).
  int64_t samples_per_rank_step() const { return samples_per_rank_step_; }

 private:
  std::string batch_dir_;
  int data_rank_ = 0, data_world_ = 1;
  bool language_model_ = false;
  int64_t batch_ = 1, seq_ = 1, vocab_ = 0, samples_per_rank_step_ = 1;
  TokenData data_, val_;
  std::optional<NpyBatches> batches_, val_batches_;
  bool validate_ = false;
  double val_fraction_ = 0;
  std::string characters_;
  Vocabulary vocabulary_;
  nlohmann::json identity_;
  std::vector<int32_t> tokens_, targets_;  // scratch
};

// Whether token data feeds the module: [batch, seq] inputs 'tokens' and
// 'targets' (a language model).
bool IsLanguageModel(const Module& module);

// The character vocabulary of scripts/prepare_data.py's meta.json: the
// byte of each id, in id order (at most the model's vocabulary).
absl::StatusOr<Vocabulary> ReadVocabulary(const std::string& path, int64_t model_vocab);

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_DATA_SOURCE_H_
