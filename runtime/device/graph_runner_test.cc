// Graph capture bookkeeping, with a launcher that records what it is asked.

#include "runtime/device/graph_runner.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace stepc {
namespace {

class FakeLauncher : public StepLauncher {
 public:
  absl::Status Enqueue() override {
    log.push_back(capturing ? "enqueue(captured)" : "enqueue");
    if (!capturing) ++steps_run;
    return enqueue_error;
  }
  absl::Status BeginCapture() override {
    log.push_back("begin");
    capturing = begin_error.ok();
    return begin_error;
  }
  absl::Status EndCapture(bool keep) override {
    log.push_back(keep ? "end(keep)" : "end(discard)");
    capturing = false;
    if (keep && end_error.ok()) graphs++;
    return end_error;
  }
  absl::Status Replay() override {
    log.push_back("replay");
    ++steps_run;
    return absl::OkStatus();
  }
  void DropGraph() override {
    log.push_back("drop");
    --graphs;
  }

  std::vector<std::string> log;
  bool capturing = false;
  int steps_run = 0, graphs = 0;
  absl::Status enqueue_error, begin_error, end_error;
};

TEST(GraphRunner, WarmsUpThenCapturesThenReplays) {
  FakeLauncher l;
  GraphRunner r(/*enabled=*/true);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(r.Run(l, 7).ok());
  EXPECT_EQ(l.log, (std::vector<std::string>{"enqueue", "begin", "enqueue(captured)",
                                              "end(keep)", "replay", "replay", "replay"}));
  EXPECT_EQ(l.steps_run, 4);  // every Run ran exactly one step
  EXPECT_EQ(r.captures(), 1);
  EXPECT_EQ(r.replays(), 3);
  EXPECT_EQ(r.eager_runs(), 1);
  EXPECT_EQ(r.mode(), GraphRunner::Mode::kReplay);
}

TEST(GraphRunner, DisabledRunsEveryStepEagerly) {
  FakeLauncher l;
  GraphRunner r(/*enabled=*/false);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(r.Run(l, 1).ok());
  EXPECT_EQ(l.log, (std::vector<std::string>{"enqueue", "enqueue", "enqueue"}));
  EXPECT_EQ(r.captures(), 0);
}

TEST(GraphRunner, NewBindingRecaptures) {
  FakeLauncher l;
  GraphRunner r(true);
  ASSERT_TRUE(r.Run(l, 1).ok());
  ASSERT_TRUE(r.Run(l, 1).ok());
  ASSERT_TRUE(r.Run(l, 2).ok());  // dropped, warm-up again
  ASSERT_TRUE(r.Run(l, 2).ok());  // captured again
  EXPECT_EQ(r.captures(), 2);
  EXPECT_EQ(l.graphs, 1);
  EXPECT_EQ(l.steps_run, 4);
  EXPECT_EQ(l.log[5], "drop");
}

TEST(GraphRunner, FailedCaptureFallsBackToEagerAndSaysWhy) {
  FakeLauncher l;
  l.end_error = absl::InternalError("cudaStreamEndCapture: operation not permitted");
  GraphRunner r(true);
  ASSERT_TRUE(r.Run(l, 1).ok());
  ASSERT_TRUE(r.Run(l, 1).ok());  // capture fails: this step still runs, eagerly
  ASSERT_TRUE(r.Run(l, 1).ok());
  EXPECT_EQ(r.mode(), GraphRunner::Mode::kEager);
  EXPECT_EQ(r.fallback_reason(), "cudaStreamEndCapture: operation not permitted");
  EXPECT_EQ(l.steps_run, 3);
  EXPECT_EQ(r.captures(), 0);
}

TEST(GraphRunner, StepErrorUnderCaptureIsReturnedAndCaptureRetried) {
  FakeLauncher l;
  GraphRunner r(true);
  ASSERT_TRUE(r.Run(l, 1).ok());
  l.enqueue_error = absl::InvalidArgumentError("launch failed");
  absl::Status s = r.Run(l, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(l.log.back(), "end(discard)");
  l.enqueue_error = absl::OkStatus();
  ASSERT_TRUE(r.Run(l, 1).ok());
  EXPECT_EQ(r.captures(), 1);
  EXPECT_EQ(r.mode(), GraphRunner::Mode::kReplay);
}

TEST(GraphRunner, WarmupFailureDoesNotCapture) {
  FakeLauncher l;
  l.enqueue_error = absl::InvalidArgumentError("bad id");
  GraphRunner r(true);
  EXPECT_FALSE(r.Run(l, 1).ok());
  EXPECT_EQ(r.mode(), GraphRunner::Mode::kWarmup);
  l.enqueue_error = absl::OkStatus();
  ASSERT_TRUE(r.Run(l, 1).ok());
  EXPECT_EQ(r.mode(), GraphRunner::Mode::kCapture);
}

}  // namespace
}  // namespace stepc
