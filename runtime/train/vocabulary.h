// What a sample decodes with (stepc-run --sample): each token id's bytes.
// A character vocabulary (a corpus's distinct bytes, prepare_data's char
// meta.json) has one byte per id; a token vocabulary (llm.c's tokenizer
// file, as its train_gpt2 reads it and scripts/prepare_data.py --tokenizer
// gpt2 writes it) has any number, and names the end-of-text token that a
// sample with no --prompt starts from.

#ifndef STEPC_RUNTIME_TRAIN_VOCABULARY_H_
#define STEPC_RUNTIME_TRAIN_VOCABULARY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace stepc {

class Vocabulary {
 public:
  Vocabulary() = default;
  // Id i is byte characters[i].
  static Vocabulary FromCharacters(const std::string& characters);
  // llm.c's tokenizer file: 256 little-endian uint32 (magic 20240328,
  // version 1 or 2, the token count, version 2's end-of-text id), then
  // each token as a length byte (>= 1) and its bytes. Every token must fit
  // the model's `model_vocab` ids.
  static absl::StatusOr<Vocabulary> ReadTokenizerFile(const std::string& path,
                                                      int64_t model_vocab);
  // Whether `path` begins with the tokenizer file's magic.
  static bool IsTokenizerFile(const std::string& path);

  bool empty() const { return tokens_.empty(); }
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  // One byte per id.
  bool by_character() const { return characters_; }
  // A character vocabulary's bytes in id order; empty for a token one.
  std::string Characters() const;
  // The end-of-text id (a token vocabulary's), else -1.
  int32_t end_of_text() const { return end_of_text_; }

  // `text` as ids: at each position the longest token that matches (a
  // character vocabulary: each byte's id). A token vocabulary read from
  // llm.c's file has no merge rules, so a prompt's ids may split it
  // otherwise than the BPE that made the training data; they decode to
  // exactly `text`. An error names the first byte no token starts with.
  absl::StatusOr<std::vector<int32_t>> Encode(const std::string& text) const;
  std::string Decode(const std::vector<int32_t>& ids) const;

 private:
  std::vector<std::string> tokens_;
  bool characters_ = true;
  int32_t end_of_text_ = -1;
  size_t longest_ = 1;  // the longest token's bytes
};

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_VOCABULARY_H_
