// Needs a GPU (ctest label `gpu`, run by scripts/gpu-check.sh): an all-reduce,
// all-gather, reduce-scatter and (2 ranks or more) transfers through NCCL on
// however many ranks mpirun starts (1 on a single-GPU machine), checked on
// the host.

#include <cuda_runtime.h>

#include <vector>

#include "gtest/gtest.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/nccl_communicator.h"

namespace stepc {
namespace {

TEST(NcclCommunicator, CollectivesMatchTheirDefinitions) {
  int argc = 0;
  char** argv = nullptr;
  // Under ctest there is no launcher: initialise MPI as a singleton.
  absl::StatusOr<bool> launched = MpiInitIfLaunched(&argc, &argv);
  ASSERT_TRUE(launched.ok()) << launched.status();
  if (!*launched) {
    setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
    ASSERT_TRUE(MpiInitIfLaunched(&argc, &argv).ok());
  }
  absl::StatusOr<std::unique_ptr<Communicator>> comm = MakeNcclCommunicator(nullptr, nullptr);
  ASSERT_TRUE(comm.ok()) << comm.status();
  const int n = (*comm)->size(), rank = (*comm)->rank();
  const int64_t count = 1024;
  float *data, *gathered, *scattered;
  ASSERT_EQ(cudaMalloc(&data, count * n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&gathered, count * n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&scattered, count * sizeof(float)), cudaSuccess);
  std::vector<float> host(count * n, static_cast<float>(rank + 1));
  cudaMemcpy(data, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);

  absl::StatusOr<int> r1 = (*comm)->StartAllReduceSum(kAxis0, data, count);
  ASSERT_TRUE(r1.ok()) << r1.status();
  ASSERT_TRUE((*comm)->Wait(*r1).ok());
  cudaDeviceSynchronize();
  cudaMemcpy(host.data(), data, count * sizeof(float), cudaMemcpyDeviceToHost);
  EXPECT_EQ(host[0], n * (n + 1) / 2.0f);  // Σ (rank + 1)

  absl::StatusOr<int> r2 = (*comm)->StartAllGather(kAxis0, data, gathered, count);
  ASSERT_TRUE(r2.ok()) << r2.status();
  ASSERT_TRUE((*comm)->Wait(*r2).ok());
  absl::StatusOr<int> r3 = (*comm)->StartReduceScatterSum(kAxis0, gathered, scattered, count);
  ASSERT_TRUE(r3.ok()) << r3.status();
  ASSERT_TRUE((*comm)->Wait(*r3).ok());
  cudaDeviceSynchronize();
  cudaMemcpy(host.data(), scattered, count * sizeof(float), cudaMemcpyDeviceToHost);
  EXPECT_EQ(host[count - 1], n * n * (n + 1) / 2.0f);

  // Point-to-point with 2 ranks or more: each rank sends to every peer
  // before it receives from any, the order in which opposite transfers on
  // one NCCL communicator would wait for each other forever.
  if (n >= 2) {
    std::vector<int> peers;
    for (int r = 0; r < n; ++r)
      if (r != rank) peers.push_back(r);
    ASSERT_TRUE((*comm)->ConnectPeers(peers).ok());
    float* inbox;
    ASSERT_EQ(cudaMalloc(&inbox, count * n * sizeof(float)), cudaSuccess);
    std::vector<int> requests;
    for (int peer : peers) {
      absl::StatusOr<int> sent = (*comm)->StartSend(peer, 1, data, count * sizeof(float));
      ASSERT_TRUE(sent.ok()) << sent.status();
      requests.push_back(*sent);
    }
    for (int peer : peers) {
      absl::StatusOr<int> received =
          (*comm)->StartRecv(peer, 1, inbox + peer * count, count * sizeof(float));
      ASSERT_TRUE(received.ok()) << received.status();
      requests.push_back(*received);
    }
    for (int request : requests) ASSERT_TRUE((*comm)->Wait(request).ok());
    cudaDeviceSynchronize();
    std::vector<float> got(count * n);
    cudaMemcpy(got.data(), inbox, got.size() * sizeof(float), cudaMemcpyDeviceToHost);
    for (int peer : peers) EXPECT_EQ(got[peer * count + 7], n * (n + 1) / 2.0f) << peer;
    cudaFree(inbox);
  }
  cudaFree(data);
  cudaFree(gathered);
  cudaFree(scattered);
  comm->reset();
  MpiFinalize();
}

}  // namespace
}  // namespace stepc
