// InterruptGuard (interrupt.h): its handler runs on its own stack, and
// SIGINTs sent while oneDNN's JIT f32 GEMMs run (the kernels in which
// stepc-run was seen to abort in free() after a signal) leave the heap and
// the products intact.

#include "runtime/train/interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/kernels/cpu/cpu_kernels.h"

namespace stepc {
namespace {

TEST(InterruptGuard, HandlesSignalsOnItsOwnStackAndRestoresWhatWasThere) {
  stack_t before;
  ASSERT_EQ(sigaltstack(nullptr, &before), 0);
  {
    InterruptGuard guard;
    struct sigaction action;
    ASSERT_EQ(sigaction(SIGINT, nullptr, &action), 0);
    EXPECT_TRUE(action.sa_flags & SA_ONSTACK);
    ASSERT_EQ(sigaction(SIGTERM, nullptr, &action), 0);
    EXPECT_TRUE(action.sa_flags & SA_ONSTACK);
    stack_t stack;
    ASSERT_EQ(sigaltstack(nullptr, &stack), 0);
    EXPECT_FALSE(stack.ss_flags & SS_DISABLE);
    EXPECT_EQ(stack.ss_size, kInterruptStackBytes);
    raise(SIGTERM);
    EXPECT_EQ(StopSignal(), SIGTERM);
  }
  stack_t after;
  ASSERT_EQ(sigaltstack(nullptr, &after), 0);
  EXPECT_EQ(after.ss_flags, before.ss_flags);
  EXPECT_EQ(after.ss_sp, before.ss_sp);
  struct sigaction action;
  ASSERT_EQ(sigaction(SIGTERM, nullptr, &action), 0);
  EXPECT_EQ(action.sa_handler, SIG_DFL);
}

TEST(EnsureSignalStack, GivesAThreadWithoutOneItsOwnAndKeepsAHostsStack) {
  std::thread fresh([] {
    stack_t stack;
    ASSERT_EQ(sigaltstack(nullptr, &stack), 0);
    ASSERT_TRUE(stack.ss_flags & SS_DISABLE);
    EnsureSignalStack();
    ASSERT_EQ(sigaltstack(nullptr, &stack), 0);
    EXPECT_FALSE(stack.ss_flags & SS_DISABLE);
    EXPECT_EQ(stack.ss_size, kInterruptStackBytes);
    void* const first = stack.ss_sp;
    EnsureSignalStack();
    ASSERT_EQ(sigaltstack(nullptr, &stack), 0);
    EXPECT_EQ(stack.ss_sp, first);
  });
  fresh.join();
  std::thread hosted([] {
    std::vector<char> own(kInterruptStackBytes / 2);
    stack_t mine = {};
    mine.ss_sp = own.data();
    mine.ss_size = own.size();
    ASSERT_EQ(sigaltstack(&mine, nullptr), 0);
    EnsureSignalStack();
    stack_t stack;
    ASSERT_EQ(sigaltstack(nullptr, &stack), 0);
    EXPECT_EQ(stack.ss_sp, own.data());
    stack_t off = {};
    off.ss_flags = SS_DISABLE;
    sigaltstack(&off, nullptr);
  });
  hosted.join();
}

// Signals land at random points of the GEMMs; each round allocates and
// frees its output, so a corrupted heap aborts here (while the frame went
// where the JIT code's rsp pointed, 4 of 4 runs of this test aborted).
TEST(InterruptGuard, SignalsDuringOneDnnGemmsLeaveTheHeapIntact) {
  const int64_t m = 512, n = 256, k = 256;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(m * k), b(k * n);
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  std::vector<float> expected(m * n);
  stepc_cpu_matmul(a.data(), b.data(), expected.data(), 1, m, n, k, 0, 1, 1);

  std::atomic<int> armed{0};
  std::atomic<bool> done{false};
  const pid_t self = getpid();
  std::thread sender([&] {
    std::mt19937 delays(11);
    while (!done.load()) {
      if (!armed.exchange(0)) {
        std::this_thread::yield();
        continue;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(delays() % 400));
      kill(self, SIGINT);
    }
  });
  const int rounds = 5000;
  int mismatched = 0;
  for (int round = 0; round < rounds; ++round) {
    InterruptGuard guard;
    armed.store(1);
    do {
      std::vector<float> c(m * n);
      stepc_cpu_matmul(a.data(), b.data(), c.data(), 1, m, n, k, 0, 1, 1);
      if (std::memcmp(c.data(), expected.data(), c.size() * sizeof(float)) != 0) ++mismatched;
    } while (StopSignal() == 0);
  }
  done.store(true);
  sender.join();
  EXPECT_EQ(mismatched, 0);
}

}  // namespace
}  // namespace stepc
