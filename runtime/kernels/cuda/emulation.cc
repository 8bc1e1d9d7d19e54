// The execution behind emulation.h, on the calling host thread. Independent
// threads (STEPC_LAUNCH) run one after another. A cooperative block's
// threads are fibers (Boost.Context: a switch is a few register moves, where
// ucontext's swapcontext made two signal-mask system calls and spent most of
// an emulated step switching) run by a small scheduler: a fiber that
// reaches __syncthreads or a warp shuffle waits at its barrier until every
// thread still running in the block (or warp) has arrived — threads that
// returned stop counting, as exited GPU threads do. A block whose fibers all
// wait at different barriers is a deadlock the kernel would have on a GPU:
// reported, then aborted.

#include "runtime/kernels/cuda/emulation.h"

#include <boost/context/fiber.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace stepc::emu {
namespace {

// A barrier among the running threads of a group (a block, or a warp).
struct Barrier {
  int participants = 0;
  int arrived = 0;
  long generation = 0;
  void Arrive() {
    if (++arrived == participants) Release();
  }
  void Leave() {
    --participants;
    if (participants > 0 && arrived == participants) Release();
  }
  void Release() {
    arrived = 0;
    ++generation;
  }
};

namespace context = boost::context;

// Hands a fiber the stack it keeps for the whole launch (FiberStack's: one
// per thread of a block, kept from launch to launch).
class BorrowedStack {
 public:
  BorrowedStack(char* base, size_t size) : base_(base), size_(size) {}
  context::stack_context allocate() {
    context::stack_context stack;
    stack.size = size_;
    stack.sp = base_ + size_;  // stacks grow down
    return stack;
  }
  void deallocate(context::stack_context&) noexcept {}

 private:
  char* base_;
  size_t size_;
};

struct Fiber {
  context::fiber context;
  char* stack = nullptr;
  ThreadState state;
  int linear = 0;
  unsigned shuffles = 0;  // this thread's warp shuffles so far (the slot set)
  bool finished = false;
  Barrier* waiting = nullptr;  // the barrier it waits at, if any
  long waited_generation = 0;
};

struct Warp {
  // A shuffle's values: lanes write one set and read it after the warp's
  // barrier, alternating sets, so no lane overwrites a set another may
  // still read (that needs every lane at the next shuffle's barrier first).
  float slots[2][32] = {};
  unsigned char gathered[2][32][64] = {};  // WarpGather's, alternating likewise
  Barrier barrier;
};

struct Block {
  Barrier barrier;
  std::vector<Warp> warps;
  std::vector<Fiber> fibers;
  context::fiber scheduler;  // where a waiting or finished fiber returns
  Fiber* current = nullptr;
  const std::function<void()>* body = nullptr;
};

constexpr size_t kFiberStack = 256 << 10;

// Thread t's fiber stack, allocated at the first launch that has a thread
// t and reused by every later one: a launch no longer maps (and faults in)
// a fresh 256 KiB per thread. One host thread runs the emulation.
char* FiberStack(int t) {
  thread_local std::vector<std::unique_ptr<char[]>> stacks;
  while (int(stacks.size()) <= t) stacks.emplace_back(new char[kFiberStack]);
  return stacks[t].get();
}

// The cooperative block, if any (__thread: see current_thread).
__thread Block* running = nullptr;
std::vector<char> shared_memory;

void Wait(Barrier& barrier) {
  Fiber* f = running->current;
  const long generation = barrier.generation;
  barrier.Arrive();
  if (barrier.generation != generation) return;  // the last to arrive
  f->waiting = &barrier;
  f->waited_generation = generation;
  running->scheduler = std::move(running->scheduler).resume();
}

context::fiber FiberMain(Block* block, context::fiber&& scheduler) {
  block->scheduler = std::move(scheduler);
  (*block->body)();
  Fiber* f = block->current;
  f->finished = true;
  block->warps[f->linear / 32].barrier.Leave();
  block->barrier.Leave();
  return std::move(block->scheduler);
}

void RequireCooperative(const char* what) {
  if (running) return;
  std::fprintf(stderr,
               "emulation: a kernel launched with STEPC_LAUNCH uses %s; launch it with "
               "STEPC_LAUNCH_COOPERATIVE\n",
               what);
  std::abort();
}

void RunCooperativeBlock(Block& block, int threads) {
  block.barrier = Barrier{threads};
  for (size_t w = 0; w < block.warps.size(); ++w) {
    block.warps[w].barrier = Barrier{std::min<int>(32, threads - 32 * int(w))};
  }
  for (int t = 0; t < threads; ++t) {
    Fiber& f = block.fibers[t];
    f.finished = false;
    f.shuffles = 0;
    f.waiting = nullptr;
    f.context = context::fiber(std::allocator_arg, BorrowedStack(f.stack, kFiberStack),
                               [&block](context::fiber&& scheduler) {
                                 return FiberMain(&block, std::move(scheduler));
                               });
  }
  for (int live = threads; live > 0;) {
    bool progress = false;
    live = 0;
    for (Fiber& f : block.fibers) {
      if (f.finished) continue;
      if (f.waiting && f.waiting->generation == f.waited_generation) {
        ++live;
        continue;
      }
      f.waiting = nullptr;
      block.current = &f;
      current_thread = &f.state;
      f.context = std::move(f.context).resume();
      progress = true;
      if (!f.finished) ++live;
    }
    if (live > 0 && !progress) {
      std::fprintf(stderr, "emulation: deadlock: the threads of block (%u, %u, %u) wait at "
                   "different barriers\n", current_thread->block.x, current_thread->block.y,
                   current_thread->block.z);
      std::abort();
    }
  }
}

}  // namespace

namespace {
// Outside a launch: a default state (every dim3 of it 1), so host code that
// reads threadIdx reads something, never a null pointer.
const ThreadState kOutsideLaunch{};
}  // namespace
__thread const ThreadState* current_thread = &kOutsideLaunch;

void SyncThreads() {
  RequireCooperative("__syncthreads");
  Wait(running->barrier);
}

void SyncWarp() {
  RequireCooperative("a warp-collective operation");
  Wait(running->warps[running->current->linear / 32].barrier);
}

float ShuffleXor(float value, int lane_mask) {
  RequireCooperative("a warp shuffle");
  Fiber& self = *running->current;
  Warp& warp = running->warps[self.linear / 32];
  const int lane = self.linear % 32;
  float* slots = warp.slots[self.shuffles++ & 1];
  slots[lane] = value;
  Wait(warp.barrier);
  return slots[lane ^ lane_mask];
}

void WarpGather(const void* mine, int bytes, void* all) {
  RequireCooperative("a warp-collective operation");
  if (bytes > 64) {
    std::fprintf(stderr, "emulation: WarpGather of %d bytes a lane (at most 64)\n", bytes);
    std::abort();
  }
  Fiber& self = *running->current;
  Warp& warp = running->warps[self.linear / 32];
  auto& set = warp.gathered[self.shuffles++ & 1];
  std::memcpy(set[self.linear % 32], mine, bytes);
  Wait(warp.barrier);
  for (int lane = 0; lane < 32; ++lane)
    std::memcpy(static_cast<unsigned char*>(all) + lane * bytes, set[lane], bytes);
}

void* DynamicShared() { return shared_memory.data(); }

float AtomicAdd(float* address, float value) {
  const float old = *address;  // one host thread runs every emulated thread
  *address = old + value;
  return old;
}

int AtomicCas(int* address, int compare, int value) {
  const int old = *address;
  if (old == compare) *address = value;
  return old;
}

void Run(dim3 grid, dim3 block, size_t shared_bytes, bool cooperative,
         const std::function<void()>& body) {
  const int threads = block.x * block.y * block.z;
  const long blocks = long(grid.x) * grid.y * grid.z;
  shared_memory.assign(shared_bytes + 16, 0);
  auto state = [&](long b, int t) {
    ThreadState s;
    s.thread = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
    s.block = dim3(b % grid.x, (b / grid.x) % grid.y, b / (long(grid.x) * grid.y));
    s.block_dim = block;
    s.grid_dim = grid;
    return s;
  };
  if (!cooperative) {
    for (long b = 0; b < blocks; ++b)
      for (int t = 0; t < threads; ++t) {
        const ThreadState s = state(b, t);
        current_thread = &s;
        body();
      }
    current_thread = &kOutsideLaunch;
    return;
  }
  Block ctx;
  ctx.body = &body;
  ctx.warps.resize((threads + 31) / 32);
  ctx.fibers.resize(threads);
  for (int t = 0; t < threads; ++t) {
    ctx.fibers[t].stack = FiberStack(t);
    ctx.fibers[t].linear = t;
  }
  running = &ctx;
  for (long b = 0; b < blocks; ++b) {
    for (int t = 0; t < threads; ++t) ctx.fibers[t].state = state(b, t);
    std::fill(shared_memory.begin(), shared_memory.end(), 0);
    RunCooperativeBlock(ctx, threads);
  }
  running = nullptr;
  current_thread = &kOutsideLaunch;
}

}  // namespace stepc::emu

namespace stepc::emu {
double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace stepc::emu
