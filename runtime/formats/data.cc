#include "runtime/formats/data.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace stepc {
namespace {

constexpr int32_t kLlmcMagic = 20240520;
constexpr size_t kLlmcHeaderBytes = 1024;

uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

absl::StatusOr<TokenData> TokenData::FromTokenFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return absl::NotFoundError(absl::StrCat("cannot open data file '", path, "'"));
  // A directory, a device (/dev/zero) or a pipe has no size to check.
  if (!std::filesystem::is_regular_file(path, ec))
    return absl::InvalidArgumentError(
        absl::StrCat("data file '", path, "' is not a regular file"));
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("cannot read data file '", path, "'"));
  if (size > kMaxTokenFileBytes)
    return absl::InvalidArgumentError(absl::StrCat("data file '", path, "' is ", size,
                                                   " bytes; at most ", kMaxTokenFileBytes,
                                                   " are read"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open data file '", path, "'"));
  std::string bytes(size, '\0');
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size)))
    return absl::DataLossError(absl::StrCat("cannot read data file '", path, "'"));
  return FromTokenBytes(bytes, path);
}

absl::StatusOr<TokenData> TokenData::FromTokenBytes(std::string_view bytes,
                                                    const std::string& path) {
  TokenData data;
  data.source_ = path;
  size_t begin = 0, count = bytes.size() / 2;
  int32_t header[3] = {0, 0, 0};
  if (bytes.size() >= sizeof(header)) std::memcpy(header, bytes.data(), sizeof(header));
  if (header[0] == kLlmcMagic) {
    if (bytes.size() < kLlmcHeaderBytes)
      return absl::DataLossError(absl::StrCat("'", path, "' is truncated: it starts with llm.c's ",
                                              "magic but is shorter than its 1024-byte header"));
    if (header[1] != 1)
      return absl::InvalidArgumentError(absl::StrCat(
          "'", path, "' is an llm.c token file of version ", header[1], "; only 1 is read"));
    if (header[2] < 0)
      return absl::DataLossError(absl::StrCat("'", path, "' has a corrupt llm.c header: ",
                                              "token count ", header[2]));
    begin = kLlmcHeaderBytes;
    count = static_cast<size_t>(header[2]);
    if ((bytes.size() - begin) / 2 < count)
      return absl::DataLossError(absl::StrCat("'", path, "' is truncated: its header promises ",
                                              count, " tokens, it holds ",
                                              (bytes.size() - begin) / 2));
  } else if (bytes.size() >= kLlmcHeaderBytes && header[2] >= 0 &&
             bytes.size() == kLlmcHeaderBytes + 2 * static_cast<size_t>(header[2])) {
    // Shaped exactly like an llm.c file (header + the count it declares)
    // but with another magic: not raw tokens.
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' looks like an llm.c token file but its magic is ", header[0],
        " (expected ", kLlmcMagic, ")"));
  } else if (bytes.size() % 2 != 0) {
    return absl::DataLossError(absl::StrCat("'", path, "' is truncated: ", bytes.size(),
                                            " bytes is not a whole number of uint16 tokens"));
  }
  data.tokens_.resize(count);
  for (size_t i = 0; i < count; ++i) {
    uint16_t t;
    std::memcpy(&t, bytes.data() + begin + 2 * i, 2);
    data.tokens_[i] = t;
  }
  return data;
}

TokenData TokenData::FromText(const std::string& text, const std::string& source) {
  TokenData data;
  data.source_ = source;
  std::string alphabet = text;
  std::sort(alphabet.begin(), alphabet.end());
  alphabet.erase(std::unique(alphabet.begin(), alphabet.end()), alphabet.end());
  int32_t rank[256] = {0};
  for (size_t i = 0; i < alphabet.size(); ++i)
    rank[static_cast<unsigned char>(alphabet[i])] = static_cast<int32_t>(i);
  data.tokens_.reserve(text.size());
  for (char c : text) data.tokens_.push_back(rank[static_cast<unsigned char>(c)]);
  data.alphabet_ = alphabet;
  return data;
}

uint64_t TokenData::Fingerprint() const {
  uint64_t hash = 0xCBF29CE484222325ull;
  auto mix = [&hash](uint64_t v) { hash = (hash ^ v) * 0x100000001B3ull; };
  mix(tokens_.size());
  for (int32_t t : tokens_) mix(static_cast<uint32_t>(t));
  for (char c : alphabet_) mix(static_cast<unsigned char>(c));
  return hash;
}

TokenData TokenData::HoldOut(double fraction) {
  TokenData held;
  const int64_t keep = size() - static_cast<int64_t>(static_cast<double>(size()) * fraction);
  held.tokens_.assign(tokens_.begin() + keep, tokens_.end());
  tokens_.resize(keep);
  held.alphabet_ = alphabet_;
  held.source_ = absl::StrCat("the last ", fraction, " of ", source_);
  source_ = absl::StrCat("the first ", 1 - fraction, " of ", source_);
  return held;
}

absl::Status TokenData::Validate(int64_t vocab, int64_t batch, int64_t seq) const {
  if (size() < seq + 1)
    return absl::InvalidArgumentError(absl::StrCat(
        "'", source_, "' holds ", size(), " tokens; a sequence of ", seq,
        " needs at least ", seq + 1, " (the model was compiled for batch ", batch, ")"));
  if (!alphabet_.empty() && alphabet() > vocab)
    return absl::InvalidArgumentError(absl::StrCat(
        source_, " has ", alphabet(), " distinct characters (its character vocabulary); the "
        "model's vocabulary is ", vocab, ": use a corpus of at most ", vocab,
        " distinct characters or a model with a larger vocabulary"));
  for (int64_t i = 0; i < size(); ++i)
    if (tokens_[i] >= vocab)
      return absl::InvalidArgumentError(absl::StrCat("'", source_, "': token id ", tokens_[i],
                                                     " at position ", i,
                                                     " is not below the model's vocabulary of ",
                                                     vocab));
  return absl::OkStatus();
}

void TokenData::Sample(uint64_t seed, int64_t step, int64_t batch, int64_t seq,
                       std::vector<int32_t>& tokens, std::vector<int32_t>& targets) const {
  tokens.resize(batch * seq);
  targets.resize(batch * seq);
  const uint64_t windows = static_cast<uint64_t>(size() - seq);
  for (int64_t b = 0; b < batch; ++b) {
    uint64_t start = Mix(Mix(seed) ^ Mix(step * 1000003ull + b)) % windows;
    for (int64_t t = 0; t < seq; ++t) {
      tokens[b * seq + t] = tokens_[start + t];
      targets[b * seq + t] = tokens_[start + t + 1];
    }
  }
}

}  // namespace stepc
