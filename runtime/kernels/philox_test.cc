// Philox-4x32-10 against Random123's published known-answer vectors, and
// the dropout threshold's rounding.

#include "runtime/kernels/philox.h"

#include <gtest/gtest.h>

namespace {

TEST(Philox, KnownAnswerVectors) {
  struct Case {
    uint32_t counter[4], key[2], expected[4];
  };
  const Case cases[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Case& c : cases) {
    uint32_t out[4];
    stepc_philox4x32_10(c.counter, c.key, out);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], c.expected[i]) << "word " << i;
  }
}

TEST(Philox, DropoutThresholdIsTheCeilingOfRateTimes2To24) {
  EXPECT_EQ(stepc_dropout_threshold(0.0), 0u);  // nothing dropped
  EXPECT_EQ(stepc_dropout_threshold(0.5), 1u << 23);
  EXPECT_EQ(stepc_dropout_threshold(0.1), 1677722u);  // 1677721.6 rounded up
  EXPECT_EQ(stepc_dropout_scale(0.5), 2.0f);
}

}  // namespace
