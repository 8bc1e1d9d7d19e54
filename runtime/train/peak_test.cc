#include "runtime/train/peak.h"

#include <cstdlib>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace stepc {
namespace {

// Ranks of a node probe at once: while this rank probes, another writes
// its rate first (simulated by a nested probe of the same key).
class RanksRace : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("stepc_peak_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    setenv("STEPC_CACHE_DIR", dir_.c_str(), 1);
    setenv("STEPC_PROBE_CACHE", "always", 1);  // cached whatever else runs
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // This rank measures `mine`; the other finished first with `theirs`.
  CachedRate Race(const std::string& key, double mine, double theirs, bool slowest) {
    return CachedProbe(
        key,
        [&] {
          CachedProbe(key, [&] { return theirs; }, slowest);
          return mine;
        },
        slowest);
  }
  std::filesystem::path dir_;
};

TEST_F(RanksRace, ThePeakIsTheFirstWritten) {
  EXPECT_EQ(Race("peak", 95, 140, /*slowest=*/false).value, 140);
  EXPECT_EQ(CachedProbe("peak", [] { return 1.0; }).value, 140);  // a rerun reads it
}

TEST_F(RanksRace, APaceRateIsTheSlowestWritten) {
  EXPECT_EQ(Race("pace", 95, 140, /*slowest=*/true).value, 95);
  EXPECT_EQ(CachedProbe("pace", [] { return 1.0; }, true).value, 95);
  // A faster rank finishing last keeps the slower rate written first.
  EXPECT_EQ(Race("pace2", 140, 95, /*slowest=*/true).value, 95);
}

}  // namespace
}  // namespace stepc
