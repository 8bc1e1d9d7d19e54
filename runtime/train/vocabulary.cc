#include "runtime/train/vocabulary.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "absl/strings/str_cat.h"

namespace stepc {
namespace {

constexpr uint32_t kTokenizerMagic = 20240328;  // llm.c's tokenizer files
constexpr int kHeaderWords = 256;

uint32_t LittleEndian(const unsigned char* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

// A byte as a reader sees it: itself when printable, else its number.
std::string Shown(unsigned char byte) {
  return byte >= 0x20 && byte < 0x7f ? absl::StrCat("'", std::string(1, char(byte)), "' (byte ",
                                                    byte, ")")
                                     : absl::StrCat("byte ", byte);
}

}  // namespace

Vocabulary Vocabulary::FromCharacters(const std::string& characters) {
  Vocabulary v;
  for (char c : characters) v.tokens_.push_back(std::string(1, c));
  return v;
}

bool Vocabulary::IsTokenizerFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char magic[4];
  return in.read(reinterpret_cast<char*>(magic), 4) && LittleEndian(magic) == kTokenizerMagic;
}

absl::StatusOr<Vocabulary> Vocabulary::ReadTokenizerFile(const std::string& path,
                                                         int64_t model_vocab) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))  // a FIFO would block
    return absl::NotFoundError(
        absl::StrCat("--vocab '", path, "' is missing or not a regular file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open --vocab '", path, "'"));
  const std::string bytes(std::istreambuf_iterator<char>(in), {});
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--vocab '", path, "' is not a valid llm.c tokenizer file: ", why));
  };
  if (bytes.size() < 4 * kHeaderWords) return bad("shorter than its 1024-byte header");
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const uint32_t version = LittleEndian(p + 4), count = LittleEndian(p + 8);
  if (LittleEndian(p) != kTokenizerMagic) return bad("wrong magic");
  if (version != 1 && version != 2)
    return bad(absl::StrCat("version ", version, " (1 or 2 are known)"));
  if (count == 0) return bad("it holds no token");
  if (count > model_vocab)
    return absl::InvalidArgumentError(absl::StrCat("--vocab '", path, "' has ", count,
                                                   " tokens; the model's vocabulary is ",
                                                   model_vocab));
  Vocabulary v;
  v.characters_ = false;
  // Version 1 is GPT-2's, whose end of text is its last id.
  v.end_of_text_ = static_cast<int32_t>(version == 2 ? LittleEndian(p + 12) : count - 1);
  if (v.end_of_text_ < 0 || static_cast<uint32_t>(v.end_of_text_) >= count)
    return bad(absl::StrCat("end-of-text id ", v.end_of_text_, " is not one of its ", count,
                            " tokens"));
  size_t at = 4 * kHeaderWords;
  v.tokens_.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    if (at >= bytes.size()) return bad(absl::StrCat("truncated at token ", i, " of ", count));
    const size_t length = p[at++];
    if (length == 0) return bad(absl::StrCat("token ", i, " is empty"));
    if (at + length > bytes.size())
      return bad(absl::StrCat("truncated at token ", i, " of ", count));
    v.tokens_.push_back(bytes.substr(at, length));
    v.longest_ = std::max(v.longest_, length);
    at += length;
  }
  if (at != bytes.size())
    return bad(absl::StrCat(bytes.size() - at, " bytes after its last token"));
  return v;
}

absl::StatusOr<std::vector<int32_t>> Vocabulary::Encode(const std::string& text) const {
  // Each token's first id (a vocabulary may list a string twice).
  std::unordered_map<std::string, int32_t> ids;
  for (size_t i = tokens_.size(); i-- > 0;) ids[tokens_[i]] = static_cast<int32_t>(i);
  std::vector<int32_t> out;
  for (size_t at = 0; at < text.size();) {
    size_t length = std::min(longest_, text.size() - at);
    for (; length > 0; --length)
      if (auto it = ids.find(text.substr(at, length)); it != ids.end()) {
        out.push_back(it->second);
        break;
      }
    if (length == 0)
      return absl::InvalidArgumentError(
          characters_
              ? absl::StrCat("--prompt holds ", Shown(static_cast<unsigned char>(text[at])),
                             ", which is not in the model's character vocabulary of ",
                             tokens_.size())
              : absl::StrCat("--prompt holds ", Shown(static_cast<unsigned char>(text[at])),
                             " at offset ", at, ", which no token of the vocabulary of ",
                             tokens_.size(), " starts with"));
    at += length;
  }
  return out;
}

std::string Vocabulary::Characters() const {
  std::string out;
  if (characters_)
    for (const std::string& t : tokens_) out += t;
  return out;
}

std::string Vocabulary::Decode(const std::vector<int32_t>& ids) const {
  std::string text;
  for (int32_t id : ids)
    if (id >= 0 && id < size()) text += tokens_[id];
  return text;
}

}  // namespace stepc
