#include "runtime/train/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "runtime/status_macros.h"

namespace stepc {

int32_t DrawToken(absl::Span<const float> logits, double temperature, int64_t top_k,
                  std::mt19937_64& rng) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  // Most likely first; ties to the lower id, so a draw is reproducible.
  auto likelier = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (temperature <= 0) return *std::min_element(order.begin(), order.end(), likelier);
  const int64_t keep = top_k > 0 ? std::min(top_k, vocab) : vocab;
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), likelier);
  // softmax(logits / T) over the kept ids, from the largest (no overflow).
  std::vector<double> weights(keep);
  for (int64_t i = 0; i < keep; ++i)
    weights[i] = std::exp((double(logits[order[i]]) - double(logits[order[0]])) / temperature);
  std::discrete_distribution<int64_t> pick(weights.begin(), weights.end());
  return order[pick(rng)];
}

namespace {

// A pipeline's logits are its last stage's.
const stepc_module_info& LogitsInfo(const Module& module) {
  const std::vector<const stepc_module_info*> stages = module.StageInfos();
  return stages.empty() ? module.info() : *stages.back();
}

}  // namespace

absl::Status CheckCanSample(const Module& module) {
  const stepc_module_info& last = LogitsInfo(module);
  if (last.logits_rank == 3) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("sampling needs [batch, seq, vocab] logits; '", module.path(), "' returns ",
                   last.logits_rank == 0 ? "none" : "logits of another rank",
                   last.logits_rank == 0 ? " (its loss is not one f32 cross-entropy)" : ""));
}

absl::StatusOr<std::vector<int32_t>> Generate(Session& session, std::vector<int32_t> prompt,
                                              const SampleOptions& options) {
  // Every rank runs its stage of the forward, the last stage's ranks draw,
  // and the token is shared.
  const stepc_module_info& info = session.module().info();
  const stepc_module_info& last = LogitsInfo(session.module());
  const bool pipeline = info.pipeline_stages > 1;
  const bool draws = !pipeline || session.module().stage() == info.pipeline_stages - 1;
  STEPC_RETURN_IF_ERROR(CheckCanSample(session.module()));
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt holds no token");
  const int64_t seq = last.logits_shape[1], vocab = last.logits_shape[2];
  std::mt19937_64 rng(options.seed);
  std::vector<int32_t> context = std::move(prompt), generated, row(seq, 0);
  std::vector<float> logits;
  for (int64_t n = 0; n < options.tokens; ++n) {
    // The newest `seq` tokens in one row (the sampling step's, or the eval
    // step's first); causal attention ignores the zeros after them.
    const int64_t used = std::min<int64_t>(seq, static_cast<int64_t>(context.size()));
    std::fill(row.begin(), row.end(), 0);
    std::copy(context.end() - used, context.end(), row.begin());
    STEPC_RETURN_IF_ERROR(session.RowLogits("tokens", row, draws ? &logits : nullptr));
    const int64_t drawable = options.vocabulary > 0 ? std::min(vocab, options.vocabulary) : vocab;
    int32_t next = -1;
    if (draws)
      next = DrawToken(absl::MakeConstSpan(logits).subspan((used - 1) * vocab, drawable),
                       options.temperature, options.top_k, rng);
    if (pipeline) {
      // Every last-stage rank drew the same token (same logits, same seed).
      STEPC_ASSIGN_OR_RETURN(const std::vector<uint64_t> all,
                             session.communicator().AllGather(static_cast<uint64_t>(next + 1)));
      next = -1;
      for (uint64_t v : all)
        if (v != 0) next = static_cast<int32_t>(v - 1);
      if (next < 0 || next >= drawable)
        return absl::InternalError("no pipeline rank drew the next token");
    }
    context.push_back(next);
    generated.push_back(next);
    if (options.progress) options.progress(static_cast<int64_t>(generated.size()));
  }
  return generated;
}

absl::StatusOr<Vocabulary> SampleVocabulary(const Vocabulary& data_vocabulary,
                                            const nlohmann::json& resumed_trainer) {
  if (!data_vocabulary.empty()) return data_vocabulary;
  std::string characters;
  if (resumed_trainer.is_object() && resumed_trainer.contains("data") &&
      resumed_trainer["data"].contains("vocabulary") &&
      resumed_trainer["data"]["vocabulary"].is_array())
    for (const nlohmann::json& b : resumed_trainer["data"]["vocabulary"])
      if (b.is_number_integer()) characters.push_back(static_cast<char>(b.get<int>()));
  if (characters.empty())
    return absl::FailedPreconditionError(
        "--sample decodes characters or tokens: train on --corpus or the embedded corpus, or "
        "give the token file's --vocab (scripts/prepare_data.py's meta.json, or llm.c's "
        "tokenizer file)");
  return Vocabulary::FromCharacters(characters);
}

}  // namespace stepc
