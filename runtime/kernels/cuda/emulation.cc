// The host threads behind emulation.h: a block's threads run concurrently
// and meet at barriers that threads leave when they return (as exited GPU
// threads stop counting at __syncthreads); a warp's 32 threads exchange
// values for shuffles through their own barrier.

#include "runtime/kernels/cuda/emulation.h"

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace stepc::emu {
namespace {

// A reusable barrier whose participants may leave; the last to arrive runs
// `completion` before anyone is released.
class Barrier {
 public:
  explicit Barrier(int count, std::function<void()> completion = nullptr)
      : count_(count), completion_(std::move(completion)) {}
  void Arrive() {
    std::unique_lock<std::mutex> lock(mu_);
    const long generation = generation_;
    if (++arrived_ == count_) {
      Release();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }
  void Leave() {
    std::unique_lock<std::mutex> lock(mu_);
    --count_;
    if (count_ > 0 && arrived_ == count_) Release();
  }
  void Reset(int count) {
    std::unique_lock<std::mutex> lock(mu_);
    count_ = count;
    arrived_ = 0;
  }

 private:
  void Release() {
    if (completion_) completion_();
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
  }
  std::function<void()> completion_;
  std::mutex mu_;
  std::condition_variable cv_;
  int count_, arrived_ = 0;
  long generation_ = 0;
};

struct Warp {
  explicit Warp(int lanes) : barrier(lanes) {}
  float slots[32] = {};
  Barrier barrier;
};

struct BlockContext {
  std::unique_ptr<Barrier> block;
  std::vector<std::unique_ptr<Warp>> warps;
};

thread_local ThreadState self;
thread_local BlockContext* context = nullptr;
thread_local int linear = 0;
std::vector<char> shared_memory;
std::mutex atomics;

}  // namespace

ThreadState& Self() { return self; }

void SyncThreads() { context->block->Arrive(); }

float ShuffleXor(float value, int lane_mask) {
  Warp& warp = *context->warps[linear / 32];
  const int lane = linear % 32;
  warp.slots[lane] = value;
  warp.barrier.Arrive();
  const float other = warp.slots[lane ^ lane_mask];
  warp.barrier.Arrive();
  return other;
}

void* DynamicShared() { return shared_memory.data(); }

float AtomicAdd(float* address, float value) {
  std::lock_guard<std::mutex> lock(atomics);
  const float old = *address;
  *address = old + value;
  return old;
}

int AtomicCas(int* address, int compare, int value) {
  std::lock_guard<std::mutex> lock(atomics);
  const int old = *address;
  if (old == compare) *address = value;
  return old;
}

// One host thread per CUDA thread of a block, for the whole launch: they
// run the blocks in turn, meeting at the end of each (where the last one
// re-arms the block's barriers and clears its shared memory).
void Run(dim3 grid, dim3 block, size_t shared_bytes, const std::function<void()>& body) {
  const int threads = block.x * block.y * block.z;
  const long blocks = long(grid.x) * grid.y * grid.z;
  shared_memory.assign(shared_bytes + 16, 0);
  BlockContext ctx;
  ctx.block = std::make_unique<Barrier>(threads);
  for (int w = 0; w < threads; w += 32)
    ctx.warps.push_back(std::make_unique<Warp>(std::min(32, threads - w)));
  Barrier end_of_block(threads, [&] {
    ctx.block->Reset(threads);
    for (size_t w = 0; w < ctx.warps.size(); ++w)
      ctx.warps[w]->barrier.Reset(std::min<int>(32, threads - 32 * int(w)));
    std::fill(shared_memory.begin(), shared_memory.end(), 0);
  });
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      context = &ctx;
      linear = t;
      self.thread = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
      self.block_dim = block;
      self.grid_dim = grid;
      for (long b = 0; b < blocks; ++b) {
        self.block = dim3(b % grid.x, (b / grid.x) % grid.y, b / (long(grid.x) * grid.y));
        body();
        ctx.warps[t / 32]->barrier.Leave();
        ctx.block->Leave();
        end_of_block.Arrive();
      }
    });
  for (std::thread& t : pool) t.join();
}

}  // namespace stepc::emu
