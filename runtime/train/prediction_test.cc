#include "runtime/train/prediction.h"

#include "gtest/gtest.h"

namespace stepc {
namespace {

constexpr char kReport[] =
    R"({"executed_flops_per_step": 1e12, "memory_bound_bytes_per_step": 4.8e9})";

TEST(DatasheetPrediction, ProductsAtThePeakAndBytesAtHbmSpeed) {
  const PeakRate h200{989.4e3, "H200 datasheet, dense bf16"};
  const StepPrediction p = PredictFromDatasheet(kReport, h200, "cuda on NVIDIA H200 (eager)");
  ASSERT_TRUE(p.known);
  EXPECT_TRUE(p.datasheet);
  EXPECT_NEAR(p.gemm_seconds, 1e12 / 989.4e12, 1e-12);
  EXPECT_NEAR(p.memory_seconds, 4.8e9 / 4.8e12, 1e-12);  // 4.8 TB/s
  EXPECT_NEAR(p.seconds, p.gemm_seconds + p.memory_seconds, 1e-15);
  EXPECT_EQ(p.memory_source, "H200 datasheet HBM");
  // An A100's HBM is slower: the same bytes take longer.
  const StepPrediction a100 = PredictFromDatasheet(kReport, {312e3, ""}, "NVIDIA A100-SXM4-80GB");
  EXPECT_NEAR(a100.memory_seconds, 4.8e9 / 2.039e12, 1e-12);
}

TEST(DatasheetPrediction, NothingOffTheTableOrWithoutCounts) {
  const PeakRate peak{989.4e3, ""};
  EXPECT_FALSE(PredictFromDatasheet(kReport, peak, "cuda on emulated CUDA device").known);
  EXPECT_FALSE(PredictFromDatasheet(R"({"executed_flops_per_step": 1})", peak, "H200").known);
  EXPECT_FALSE(PredictFromDatasheet("not json", peak, "H200").known);
  EXPECT_FALSE(PredictFromDatasheet(kReport, PeakRate{}, "H200").known);
}

}  // namespace
}  // namespace stepc
