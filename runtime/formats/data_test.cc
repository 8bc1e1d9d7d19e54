#include "runtime/formats/data.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>

#include "gtest/gtest.h"

namespace stepc {
namespace {

std::string TempPath(const char* name) { return std::string(::testing::TempDir()) + name; }

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(TokenData, ReadsFlatUint16) {
  std::string path = TempPath("flat.bin");
  WriteBytes(path, std::string("\x01\x00\x02\x01\xff\xff", 6));
  absl::StatusOr<TokenData> data = TokenData::FromTokenFile(path);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->size(), 3);
  std::vector<int32_t> tokens, targets;
  data->Sample(0, 0, 1, 2, tokens, targets);
  EXPECT_EQ(tokens, (std::vector<int32_t>{1, 258}));
  EXPECT_EQ(targets, (std::vector<int32_t>{258, 65535}));
}

TEST(TokenData, ReadsLlmcHeaderAndRejectsTruncation) {
  std::string header(1024, '\0');
  int32_t fields[3] = {20240520, 1, 4};
  std::memcpy(header.data(), fields, sizeof(fields));
  std::string path = TempPath("llmc.bin");
  WriteBytes(path, header + std::string("\x05\x00\x06\x00\x07\x00\x08\x00", 8));
  absl::StatusOr<TokenData> data = TokenData::FromTokenFile(path);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->size(), 4);
  WriteBytes(path, header + std::string("\x05\x00\x06\x00", 4));
  EXPECT_EQ(TokenData::FromTokenFile(path).status().code(), absl::StatusCode::kDataLoss);
}

TEST(TokenData, RejectsOddSizesMissingFilesAndLargeIds) {
  std::string path = TempPath("odd.bin");
  WriteBytes(path, std::string("\x01\x00\x02", 3));
  EXPECT_EQ(TokenData::FromTokenFile(path).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(TokenData::FromTokenFile(TempPath("missing.bin")).status().code(),
            absl::StatusCode::kNotFound);
  TokenData text = TokenData::FromText("abcabc");
  EXPECT_EQ(text.alphabet(), 3);
  EXPECT_TRUE(text.Validate(3, 1, 4).ok());
  EXPECT_EQ(text.Validate(2, 1, 4).code(), absl::StatusCode::kInvalidArgument);  // id 2 >= 2
  EXPECT_EQ(text.Validate(3, 1, 6).code(), absl::StatusCode::kInvalidArgument);  // too short
}

TEST(TokenData, SamplesAreDeterministicAndShifted) {
  TokenData data = TokenData::FromText(EmbeddedCorpus());
  std::vector<int32_t> a, at, b, bt;
  data.Sample(7, 3, 4, 16, a, at);
  data.Sample(7, 3, 4, 16, b, bt);
  EXPECT_EQ(a, b);
  for (int r = 0; r < 4; ++r)
    for (int t = 0; t + 1 < 16; ++t) EXPECT_EQ(at[r * 16 + t], a[r * 16 + t + 1]);
  data.Sample(7, 4, 4, 16, b, bt);
  EXPECT_NE(a, b);
  EXPECT_GT(data.alphabet(), 30);
  EXPECT_LT(data.alphabet(), 100);
}

}  // namespace
}  // namespace stepc
