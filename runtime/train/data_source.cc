#include "runtime/train/data_source.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/status_macros.h"

namespace stepc {
namespace {

using json = nlohmann::json;

// The names of the step's inputs, for messages.
std::string InputNames(const stepc_module_info& info) {
  std::vector<std::string> names;
  for (int i = 0; i < info.num_args; ++i)
    if (info.args[i].kind == STEPC_ARG_INPUT)
      names.push_back(absl::StrCat("'", info.args[i].name, "'"));
  return absl::StrJoin(names, ", ");
}

// Rows [rank·rows, (rank+1)·rows) of a [world·rows, seq] batch.
std::vector<int32_t> RankSlice(const std::vector<int32_t>& global, int rank, int64_t rows,
                               int64_t seq) {
  return std::vector<int32_t>(global.begin() + rank * rows * seq,
                              global.begin() + (rank + 1) * rows * seq);
}

// What the checkpoint records of the data: its identity, and the
// character vocabulary (so a resumed run or a sampler decodes the same ids).
json DataJson(const std::string& source, int64_t size, const char* unit, uint64_t fingerprint,
              const std::string& characters, double fraction) {
  // Another split trains on other tokens.
  uint64_t bits;  // the value's bits: the same fingerprint on any host
  std::memcpy(&bits, &fraction, sizeof(bits));
  fingerprint = (fingerprint ^ bits) * 0x100000001B3ull;
  std::vector<int> vocabulary;
  for (unsigned char c : characters) vocabulary.push_back(c);
  return {{"source", source},
          {"tokens", size},
          {"unit", unit},
          {"val_fraction", fraction},
          {"fingerprint", absl::StrFormat("%016x", fingerprint)},
          {"vocabulary", vocabulary}};
}

absl::StatusOr<TokenData> ReadCorpus(const std::string& corpus) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(corpus, ec))
    return absl::NotFoundError(absl::StrCat(
        "corpus '", corpus, "' ",
        std::filesystem::exists(corpus, ec) ? "is not a regular file" : "does not exist"));
  if (std::filesystem::file_size(corpus, ec) > kMaxTokenFileBytes / 2)
    return absl::InvalidArgumentError(
        absl::StrCat("corpus '", corpus, "' is larger than ", kMaxTokenFileBytes / 2, " bytes"));
  std::ifstream in(corpus, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open corpus '", corpus, "'"));
  return TokenData::FromText(std::string(std::istreambuf_iterator<char>(in), {}), corpus);
}

}  // namespace

absl::StatusOr<Vocabulary> ReadVocabulary(const std::string& path, int64_t model_vocab) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))  // a FIFO would block
    return absl::NotFoundError(
        absl::StrCat("--vocab '", path, "' is missing or not a regular file"));
  if (Vocabulary::IsTokenizerFile(path)) return Vocabulary::ReadTokenizerFile(path, model_vocab);
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open --vocab '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  const json meta = json::parse(text.str(), nullptr, false);
  // prepare_data --tokenizer gpt2's meta.json names the tokenizer file
  // beside it.
  if (!meta.is_discarded() && meta.is_object() && meta.contains("tokenizer_file") &&
      meta["tokenizer_file"].is_string())
    return Vocabulary::ReadTokenizerFile(
        (std::filesystem::path(path).parent_path() / meta["tokenizer_file"].get<std::string>())
            .string(),
        model_vocab);
  if (meta.is_discarded() || !meta.is_object() || !meta.contains("vocabulary") ||
      !meta["vocabulary"].is_array())
    return absl::InvalidArgumentError(absl::StrCat(
        "--vocab '", path,
        "' is neither llm.c's tokenizer file nor a meta.json with a \"vocabulary\" list "
        "(scripts/prepare_data.py --tokenizer char writes one)"));
  std::string vocabulary;
  for (const json& b : meta["vocabulary"]) {
    if (!b.is_number_integer() || b.get<int64_t>() < 0 || b.get<int64_t>() > 255)
      return absl::InvalidArgumentError(
          absl::StrCat("--vocab '", path, "': the vocabulary lists bytes 0..255, got ", b.dump()));
    vocabulary.push_back(static_cast<char>(b.get<int>()));
  }
  if (static_cast<int64_t>(vocabulary.size()) > model_vocab)
    return absl::InvalidArgumentError(absl::StrCat("--vocab '", path, "' has ", vocabulary.size(),
                                                   " characters; the model's vocabulary is ",
                                                   model_vocab));
  return Vocabulary::FromCharacters(vocabulary);
}

bool IsLanguageModel(const Module& module) {
  const stepc_module_info& info = module.info();
  const int tokens_arg = module.FindArg("tokens"), targets_arg = module.FindArg("targets");
  return tokens_arg >= 0 && targets_arg >= 0 && info.args[tokens_arg].kind == STEPC_ARG_INPUT &&
         info.args[tokens_arg].rank == 2;
}

absl::StatusOr<DataSource> DataSource::Open(const TrainOptions& o, const Module& module, int rank,
                                            int world, bool no_data) {
  DataSource d;
  const stepc_module_info& info = module.info();
  // The ranks of a tp group (consecutive: tp is the innermost mesh axis)
  // compute on the same rows: the batch is split over the data ranks.
  // So do a pipeline's stages.
  const int tp = std::max(1, info.tensor_parallel) * std::max(1, info.pipeline_stages);
  d.data_rank_ = rank / tp;
  d.data_world_ = world / tp;
  d.batch_dir_ = o.batch_npy;
  d.val_fraction_ = o.val_fraction;
  // Token data feeds a language model's [batch, seq] 'tokens' and
  // 'targets'; --batch-npy any model's inputs, by name.
  const int tokens_arg = module.FindArg("tokens");
  d.language_model_ = IsLanguageModel(module);
  for (int i = 0; i < info.num_args; ++i)
    if (info.args[i].kind == STEPC_ARG_INPUT) {
      d.samples_per_rank_step_ = info.args[i].rank >= 1 ? info.args[i].shape[0] : 1;
      break;
    }
  if (d.batch_dir_.empty() && !d.language_model_)
    return absl::InvalidArgumentError(
        absl::StrCat("the model's inputs are ", InputNames(info),
                     "; token data feeds [batch, seq] 'tokens' and 'targets': give this model's "
                     "inputs with --batch-npy DIR"));
  // Each data rank computes on `batch` rows of the global batch of
  // data_world·batch.
  if (d.language_model_) {
    d.batch_ = info.args[tokens_arg].shape[0];
    d.seq_ = info.args[tokens_arg].shape[1];
    d.vocab_ = info.args[tokens_arg].id_bound;
  }
  if (no_data) {
    d.data_ = TokenData::FromText("", "no data (nothing to train)");
  } else if (!d.batch_dir_.empty()) {
    STEPC_ASSIGN_OR_RETURN(NpyBatches opened,
                           NpyBatches::Open(d.batch_dir_, module, d.data_rank_, d.data_world_));
    d.batches_ = std::move(opened);
  } else {
    if (!o.data.empty()) {
      STEPC_ASSIGN_OR_RETURN(d.data_, TokenData::FromTokenFile(o.data));
    } else if (!o.corpus.empty()) {
      STEPC_ASSIGN_OR_RETURN(d.data_, ReadCorpus(o.corpus));
    } else {
      d.data_ = TokenData::FromText(EmbeddedCorpus(), "the embedded corpus");
    }
    STEPC_RETURN_IF_ERROR(d.data_.Validate(d.vocab_, d.global_batch(), d.seq_));
  }
  // The character vocabulary: the corpus's, or a token file's --vocab.
  d.characters_ = d.data_.vocabulary();
  d.vocabulary_ = Vocabulary::FromCharacters(d.characters_);
  if (!o.vocab.empty()) {
    STEPC_ASSIGN_OR_RETURN(d.vocabulary_, ReadVocabulary(o.vocab, d.vocab_));
    // A checkpoint keeps a character vocabulary (a token one is --vocab's file).
    if (d.vocabulary_.by_character()) d.characters_ = d.vocabulary_.Characters();
  }
  d.identity_ = d.batches_ ? DataJson(d.batch_dir_, d.batches_->count(), "batches",
                                      d.batches_->Fingerprint(), "", o.val_fraction)
                           : DataJson(d.data_.source(), d.data_.size(), "tokens",
                                      d.data_.Fingerprint(), d.characters_, o.val_fraction);
  return d;
}

absl::Status DataSource::OpenValidation(const TrainOptions& o, const Module& module) {
  // Validation data: a held-out tail of the training tokens, a file, or
  // .npy batches.
  if (!o.val_batch_npy.empty()) {
    STEPC_ASSIGN_OR_RETURN(NpyBatches opened,
                           NpyBatches::Open(o.val_batch_npy, module, data_rank_, data_world_));
    val_batches_ = std::move(opened);
  }
  validate_ = o.val_fraction > 0 || !o.val_data.empty() || val_batches_.has_value();
  if (o.val_fraction > 0) {
    val_ = data_.HoldOut(o.val_fraction);
    STEPC_RETURN_IF_ERROR(data_.Validate(vocab_, global_batch(), seq_));
  } else if (!o.val_data.empty()) {
    STEPC_ASSIGN_OR_RETURN(val_, TokenData::FromTokenFile(o.val_data));
  }
  if (validate_ && !val_batches_)
    STEPC_RETURN_IF_ERROR(val_.Validate(vocab_, global_batch(), seq_));
  return absl::OkStatus();
}

absl::Status DataSource::SetStep(Session& session, uint64_t seed, int64_t step) {
  if (batches_) {
    STEPC_ASSIGN_OR_RETURN(const InputBatch b, batches_->Load(step - 1));
    return SetBatch(session, b);
  }
  // The global batch of this step, the same on every rank; keep our rows.
  data_.Sample(seed, step, global_batch(), seq_, tokens_, targets_);
  if (data_world_ > 1) {
    tokens_ = RankSlice(tokens_, data_rank_, batch_, seq_);
    targets_ = RankSlice(targets_, data_rank_, batch_, seq_);
  }
  STEPC_RETURN_IF_ERROR(session.SetInput("tokens", tokens_));
  return session.SetInput("targets", targets_);
}

absl::Status DataSource::SetValidation(Session& session, uint64_t seed, int64_t j) {
  val_.Sample(seed ^ 0x5EEDull, j, global_batch(), seq_, tokens_, targets_);
  if (data_world_ > 1) {
    tokens_ = RankSlice(tokens_, data_rank_, batch_, seq_);
    targets_ = RankSlice(targets_, data_rank_, batch_, seq_);
  }
  STEPC_RETURN_IF_ERROR(session.SetInput("tokens", tokens_));
  return session.SetInput("targets", targets_);
}

std::string DataSource::Describe() const {
  if (batches_)
    return absl::StrCat(batch_dir_, " (", batches_->count(), " batch",
                        batches_->count() > 1 ? "es" : "", ")");
  return data_.source();
}

absl::Status DataSource::CheckResumed(const json& trainer, const std::string& resume_dir) const {
  // Other data would make the resumed run another run: refuse it. (The
  // trainer state is another program's file: every field is checked.)
  if (!trainer.is_object() || !trainer.contains("data")) return absl::OkStatus();
  const json& saved = trainer["data"];
  if (!saved.is_object() || !saved.contains("fingerprint") || !saved["fingerprint"].is_string() ||
      !saved.contains("source") || !saved["source"].is_string() || !saved.contains("tokens") ||
      !saved["tokens"].is_number_integer())
    return absl::DataLossError(absl::StrCat("checkpoint '", resume_dir,
                                            "': its trainer state's \"data\" lacks a string "
                                            "fingerprint or source or an integer token count"));
  if (saved["fingerprint"] != identity_["fingerprint"]) {
    // Each side as it differs: the source and size, or (the same data)
    // the validation split, or (the same names) the contents.
    const bool same_source =
        saved["source"] == identity_["source"] && saved["tokens"] == identity_["tokens"];
    const bool split_known = saved.contains("val_fraction") && saved["val_fraction"].is_number();
    const bool other_split =
        same_source && split_known && saved["val_fraction"] != identity_["val_fraction"];
    auto describe = [&](const json& d) {
      const json unit = d.value("unit", json("tokens"));
      std::string text =
          absl::StrCat(d["source"].get<std::string>(), " (", d["tokens"].get<int64_t>(), " ",
                       unit.is_string() ? unit.get<std::string>() : "tokens");
      if (other_split) absl::StrAppend(&text, ", --val-fraction ", d["val_fraction"].dump());
      return text + ")";
    };
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint '", resume_dir, "' was trained on ", describe(saved), "; this run reads ",
        describe(identity_),
        other_split   ? ": resume with the same --val-fraction"
        : same_source ? ", whose contents differ (fingerprint " +
                            identity_["fingerprint"].get<std::string>() + ", the checkpoint's " +
                            saved["fingerprint"].get<std::string>() +
                            "): resume with the data it was trained on"
                      : ": resume with the same --data, --corpus or --batch-npy"));
  }
  return absl::OkStatus();
}

}  // namespace stepc
