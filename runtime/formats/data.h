// Training data: token files (nanoGPT's flat uint16, llm.c's headered
// uint16), text corpora under a character tokenizer, and batch sampling.

#ifndef STEPC_RUNTIME_DATA_H_
#define STEPC_RUNTIME_DATA_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace stepc {

// The largest token file read (16 GiB: 8G tokens), so a wrong path never
// reads without bound.
constexpr uintmax_t kMaxTokenFileBytes = uintmax_t{16} << 30;

class TokenData {
 public:
  // A token file: flat little-endian uint16 (nanoGPT), or llm.c's format
  // (256 int32 header, magic 20240520, version 1, token count; then uint16).
  // DataLoss for a truncated or corrupt file, NotFound for a missing one,
  // InvalidArgument for what is not a regular file, is larger than
  // kMaxTokenFileBytes, or is shaped like an llm.c file with another magic.
  static absl::StatusOr<TokenData> FromTokenFile(const std::string& path);
  // The same from a token file's bytes (`path` names it in errors).
  static absl::StatusOr<TokenData> FromTokenBytes(std::string_view bytes, const std::string& path);
  // Text under a character tokenizer: ids are the ranks of the distinct
  // bytes of the text. `source` names it in errors (the corpus file).
  static TokenData FromText(const std::string& text, const std::string& source = "text");

  // Checks every id is below `vocab` and that a [batch, seq] window fits.
  absl::Status Validate(int64_t vocab, int64_t batch, int64_t seq) const;
  // Fills tokens/targets ([batch, seq], targets shifted by one) from `batch`
  // windows at offsets drawn from (seed, step): the same global batch for a
  // given seed and step, whoever asks.
  void Sample(uint64_t seed, int64_t step, int64_t batch, int64_t seq,
              std::vector<int32_t>& tokens, std::vector<int32_t>& targets) const;

  // Moves the last `fraction` (0 < fraction < 1) of the tokens into the
  // returned data (a validation split, nanoGPT-style: the text's end), which
  // shares this data's vocabulary; `source` names it in errors.
  TokenData HoldOut(double fraction);

  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  int32_t token(int64_t i) const { return tokens_[i]; }
  // Distinct symbols (the character vocabulary; 0 for token files).
  int64_t alphabet() const { return static_cast<int64_t>(alphabet_.size()); }
  // The character vocabulary: byte `vocabulary()[i]` is id i (empty for
  // token files).
  const std::string& vocabulary() const { return alphabet_; }
  // A hash of every token (and the vocabulary): equal data, equal hash.
  uint64_t Fingerprint() const;
  const std::string& source() const { return source_; }

 private:
  std::vector<int32_t> tokens_;
  std::string alphabet_;
  std::string source_;
};

// The corpus stepc-run trains on by default (examples/data/, compiled in).
const std::string& EmbeddedCorpus();

}  // namespace stepc

#endif  // STEPC_RUNTIME_DATA_H_
