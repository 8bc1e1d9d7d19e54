#include "runtime/train/schedule.h"

#include <cmath>

#include "gtest/gtest.h"

namespace stepc {
namespace {

// Steps count from 1: warmup reaches lr at step `warmup` in equal rises,
// then a half cosine takes it to lr·min_ratio at the last step. The
// figures are the closed form worked by hand (steps 10, warmup 2, lr 1,
// min ratio 0.1).
TEST(LearningRate, WarmsUpLinearlyThenFollowsTheCosine) {
  const Schedule s{/*steps=*/10, /*lr=*/1.0, /*warmup=*/2, /*min_lr_ratio=*/0.1, /*seed=*/0};
  EXPECT_DOUBLE_EQ(LearningRate(s, 1), 0.5);
  EXPECT_DOUBLE_EQ(LearningRate(s, 2), 1.0);
  // Half way through the cosine (step 6 of 2..10): 0.1 + 0.9 · 0.5.
  EXPECT_NEAR(LearningRate(s, 6), 0.55, 1e-15);
  // A quarter of the way (step 4): 0.1 + 0.9 · (1 + cos(π/4)) / 2.
  EXPECT_NEAR(LearningRate(s, 4), 0.1 + 0.45 * (1.0 + std::sqrt(0.5)), 1e-15);
  EXPECT_NEAR(LearningRate(s, 10), 0.1, 1e-15);
}

TEST(LearningRate, NoWarmupAndWarmupPastTheEnd) {
  const Schedule cosine{4, 2.0, 0, 0.0, 0};
  EXPECT_NEAR(LearningRate(cosine, 2), 1.0, 1e-15);  // 2 · (1 + cos(π/2)) / 2
  EXPECT_NEAR(LearningRate(cosine, 4), 0.0, 1e-15);
  const Schedule all_warmup{3, 3.0, 5, 0.5, 0};  // the run ends inside its warmup
  EXPECT_DOUBLE_EQ(LearningRate(all_warmup, 3), 3.0 * 3 / 5);
}

}  // namespace
}  // namespace stepc
