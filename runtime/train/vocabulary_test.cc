#include "runtime/train/vocabulary.h"

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace stepc {
namespace {

// llm.c's tokenizer file of `tokens`, written under the test's own name.
std::string WriteTokenizer(const std::vector<std::string>& tokens, uint32_t version,
                           uint32_t end_of_text) {
  const std::string path =
      (std::filesystem::temp_directory_path() /
       ("stepc_vocabulary_test_" + std::to_string(::getpid()) + "_" +
        ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".bin"))
          .string();
  std::vector<uint32_t> header(256, 0);
  header[0] = 20240328;
  header[1] = version;
  header[2] = static_cast<uint32_t>(tokens.size());
  header[3] = end_of_text;
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), 1024);  // little-endian host
  for (const std::string& t : tokens) {
    out.put(static_cast<char>(t.size()));
    out.write(t.data(), static_cast<std::streamsize>(t.size()));
  }
  return path;
}

TEST(Vocabulary, TokenizerFileEncodesByLongestMatchAndDecodes) {
  const std::string path = WriteTokenizer({"a", "b", "ab", "abc", " ", "<|eot|>"}, 2, 5);
  absl::StatusOr<Vocabulary> v = Vocabulary::ReadTokenizerFile(path, 16);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_FALSE(v->by_character());
  EXPECT_EQ(v->size(), 6);
  EXPECT_EQ(v->end_of_text(), 5);
  EXPECT_EQ(v->Characters(), "");
  absl::StatusOr<std::vector<int32_t>> ids = v->Encode("abcab b");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, (std::vector<int32_t>{3, 2, 4, 1}));
  EXPECT_EQ(v->Decode(*ids), "abcab b");
  EXPECT_EQ(v->Decode({5, 0}), "<|eot|>a");
  absl::StatusOr<std::vector<int32_t>> bad = v->Encode("ab~");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--prompt holds '~' (byte 126) at offset 2, which no token of the vocabulary of 6 "
            "starts with");
  std::filesystem::remove(path);
}

TEST(Vocabulary, VersionOneEndsWithEndOfText) {
  const std::string path = WriteTokenizer({"x", "y", "<eot>"}, 1, 0);
  absl::StatusOr<Vocabulary> v = Vocabulary::ReadTokenizerFile(path, 3);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->end_of_text(), 2);
  // More tokens than the model's ids is an error naming both counts.
  absl::StatusOr<Vocabulary> small = Vocabulary::ReadTokenizerFile(path, 2);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("has 3 tokens; the model's vocabulary is 2"),
            std::string::npos);
  std::filesystem::remove(path);
}

TEST(Vocabulary, CharactersEncodeEachByte) {
  const Vocabulary v = Vocabulary::FromCharacters("\n abc");
  EXPECT_TRUE(v.by_character());
  EXPECT_EQ(v.end_of_text(), -1);
  EXPECT_EQ(v.Characters(), "\n abc");
  absl::StatusOr<std::vector<int32_t>> ids = v.Encode("cab a");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{4, 2, 3, 1, 2}));
  absl::StatusOr<std::vector<int32_t>> bad = v.Encode("\xe2");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--prompt holds byte 226, which is not in the model's character vocabulary of 5");
}

}  // namespace
}  // namespace stepc
