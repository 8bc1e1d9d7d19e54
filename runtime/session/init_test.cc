#include "runtime/session/init.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace stepc {
namespace {

TEST(InitParams, NormalHasTheRequestedMomentsAndIsDeterministic) {
  std::vector<float> a(100000), b(100000);
  FillInitial(3, "h.0.attn.c_attn.weight", STEPC_INIT_NORMAL, 0.02, absl::MakeSpan(a));
  FillInitial(3, "h.0.attn.c_attn.weight", STEPC_INIT_NORMAL, 0.02, absl::MakeSpan(b));
  EXPECT_EQ(a, b);
  double mean = 0, var = 0;
  for (float x : a) mean += x;
  mean /= a.size();
  for (float x : a) var += (x - mean) * (x - mean);
  var /= a.size();
  EXPECT_NEAR(mean, 0.0, 0.02 * 5 / std::sqrt(1e5));  // 5 standard errors
  EXPECT_NEAR(std::sqrt(var), 0.02, 0.02 * 0.01);
}

TEST(InitParams, ElementsDependOnlyOnSeedNameAndIndex) {
  std::vector<float> whole(10), shard(4);
  FillInitial(1, "wte", STEPC_INIT_NORMAL, 1.0, absl::MakeSpan(whole));
  FillInitial(1, "wte", STEPC_INIT_NORMAL, 1.0, absl::MakeSpan(shard));
  for (int k = 0; k < 4; ++k) EXPECT_EQ(whole[k], shard[k]);
  std::vector<float> tail(6);
  FillInitial(1, "wte", STEPC_INIT_NORMAL, 1.0, absl::MakeSpan(tail), /*offset=*/4);
  for (int k = 0; k < 6; ++k) EXPECT_EQ(whole[4 + k], tail[k]) << k;  // a shard's draw
  std::vector<float> other(10), reseeded(10);
  FillInitial(1, "wpe", STEPC_INIT_NORMAL, 1.0, absl::MakeSpan(other));
  FillInitial(2, "wte", STEPC_INIT_NORMAL, 1.0, absl::MakeSpan(reseeded));
  EXPECT_NE(whole, other);
  EXPECT_NE(whole, reseeded);
}

TEST(InitParams, ZerosAndOnes) {
  std::vector<float> v(5, 7.0f);
  FillInitial(0, "b", STEPC_INIT_ZEROS, 0.0, absl::MakeSpan(v));
  EXPECT_EQ(v, std::vector<float>(5, 0.0f));
  FillInitial(0, "w", STEPC_INIT_ONES, 0.0, absl::MakeSpan(v));
  EXPECT_EQ(v, std::vector<float>(5, 1.0f));
}

}  // namespace
}  // namespace stepc
