// Text generation with a trained model's forward-only step (stepc-run
// --sample): the whole context is recomputed for every token (no KV cache).

#ifndef STEPC_RUNTIME_TRAIN_SAMPLER_H_
#define STEPC_RUNTIME_TRAIN_SAMPLER_H_

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "nlohmann/json.hpp"
#include "runtime/session/session.h"
#include "runtime/train/vocabulary.h"

namespace stepc {

struct SampleOptions {
  int64_t tokens = 0;        // how many to generate
  double temperature = 0.8;  // 0: always the most likely token
  int64_t top_k = 200;       // keep the k most likely (0: all)
  uint64_t seed = 0;
  // Draw only ids below this (the decoder's vocabulary, which may be smaller
  // than the model's padded one); 0: every id.
  int64_t vocabulary = 0;
  // Called after each drawn id with the ids drawn so far (progress of a
  // long sample); may be empty.
  std::function<void(int64_t drawn)> progress;
};

// The next id drawn from `logits` (one position's V values) at
// `temperature`, among the `top_k` most likely.
int32_t DrawToken(absl::Span<const float> logits, double temperature, int64_t top_k,
                  std::mt19937_64& rng);

// Whether `module` can sample: its eval step returns [batch, seq, vocab]
// logits (checked before training, so a run never ends on it).
absl::Status CheckCanSample(const Module& module);

// `options.tokens` ids generated after `prompt` (at least one id): each
// from the logits the eval step gives the last position of the context (the
// newest tokens that fit the compiled sequence length, in row 0 of the
// batch). Collective under sharding: every rank calls it alike and draws
// the same ids.
absl::StatusOr<std::vector<int32_t>> Generate(Session& session, std::vector<int32_t> prompt,
                                              const SampleOptions& options);

// The vocabulary a sample decodes with: the data's (a corpus's characters,
// or --vocab's), else the characters a resumed checkpoint's trainer state
// saved; an error if neither has one.
absl::StatusOr<Vocabulary> SampleVocabulary(const Vocabulary& data_vocabulary,
                                            const nlohmann::json& resumed_trainer);

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_SAMPLER_H_
