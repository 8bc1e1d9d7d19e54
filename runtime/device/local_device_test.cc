#include "runtime/device/local_device.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace stepc {
namespace {

class LocalDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* var : kVars) unsetenv(var);
  }
  void TearDown() override { SetUp(); }
  static constexpr const char* kVars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                          "MPI_LOCALRANKID", "LOCAL_RANK"};
};

TEST_F(LocalDeviceTest, NoLauncherIsDeviceZero) {
  EXPECT_EQ(LocalRankFromEnvironment(), -1);
  EXPECT_EQ(LocalDeviceOrdinal(8), 0);
}

TEST_F(LocalDeviceTest, EachLauncherIsRead) {
  for (const char* var : kVars) {
    setenv(var, "5", 1);
    EXPECT_EQ(LocalRankFromEnvironment(), 5) << var;
    EXPECT_EQ(LocalDeviceOrdinal(8), 5) << var;
    EXPECT_EQ(LocalDeviceOrdinal(4), 1) << var;  // more local ranks than GPUs: wrap
    unsetenv(var);
  }
}

TEST_F(LocalDeviceTest, OpenMpiWinsOverSlurm) {
  setenv("SLURM_LOCALID", "3", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2", 1);
  EXPECT_EQ(LocalDeviceOrdinal(8), 2);
}

TEST_F(LocalDeviceTest, MalformedValuesAreIgnored) {
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "x", 1);
  setenv("SLURM_LOCALID", "-2", 1);
  setenv("LOCAL_RANK", "3", 1);
  EXPECT_EQ(LocalDeviceOrdinal(8), 3);
  EXPECT_EQ(LocalDeviceOrdinal(0), 0);
}

}  // namespace
}  // namespace stepc
