// The mesh arithmetic every communicator (MPI, NCCL) builds its groups from.

#include "runtime/comm/communicator.h"

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"

namespace stepc {
namespace {

TEST(Mesh, CoordinatesAreRowMajor) {
  const std::vector<int> mesh = {2, 3, 2};  // rank = 6·a + 2·b + c
  EXPECT_EQ(MeshCoordinate(mesh, 11, 0), 1);
  EXPECT_EQ(MeshCoordinate(mesh, 11, 1), 2);
  EXPECT_EQ(MeshCoordinate(mesh, 11, 2), 1);
  EXPECT_EQ(MeshCoordinate(mesh, 4, 1), 2);
}

TEST(Mesh, SplitsGroupTheRanksThatAgreeOutsideTheMask) {
  const std::vector<int> mesh = {2, 3};
  // Mask 2 (axis 1): a row of 3 ranks; its color is the axis-0 coordinate.
  for (int rank = 0; rank < 6; ++rank)
    for (const MeshSplit& split : MeshSplits(mesh, rank)) {
      if (split.mask == 1) EXPECT_EQ(split.color, rank % 3) << rank;
      if (split.mask == 2) EXPECT_EQ(split.color, rank / 3) << rank;
      if (split.mask == 3) EXPECT_EQ(split.color, 0) << rank;
    }
  EXPECT_EQ(MeshSplits(mesh, 0).size(), 3u);
}

TEST(Mesh, AxisPeersAreTheOtherRanksAlongTheAxis) {
  // ddp:2,pp:3,tp:2: a pipeline group holds the ranks 2 apart.
  const std::vector<int> mesh = {2, 3, 2};
  EXPECT_EQ(AxisPeers(mesh, 7, 1), (std::vector<int>{9, 11}));
  EXPECT_EQ(AxisPeers(mesh, 9, 1), (std::vector<int>{7, 11}));
  EXPECT_EQ(AxisPeers(mesh, 0, 0), (std::vector<int>{6}));
  EXPECT_EQ(AxisPeers(mesh, 5, 2), (std::vector<int>{4}));
  EXPECT_TRUE(AxisPeers({4}, 2, 0) == (std::vector<int>{0, 1, 3}));
  EXPECT_TRUE(AxisPeers({1, 4}, 3, 0).empty());
  // Peers are symmetric: each rank is among its peers' peers.
  for (int rank = 0; rank < 12; ++rank)
    for (int peer : AxisPeers(mesh, rank, 1)) {
      std::vector<int> back = AxisPeers(mesh, peer, 1);
      EXPECT_NE(std::find(back.begin(), back.end(), rank), back.end()) << rank << " " << peer;
    }
}

}  // namespace
}  // namespace stepc
