#include "runtime/device/graph_runner.h"

#include "absl/strings/str_cat.h"

namespace stepc {

absl::Status GraphRunner::RunEager(StepLauncher& launcher) {
  ++eager_runs_;
  return launcher.Enqueue();
}

absl::Status GraphRunner::FallBack(StepLauncher& launcher, const absl::Status& why) {
  mode_ = Mode::kEager;
  fallback_reason_ = std::string(why.message());
  return RunEager(launcher);
}

absl::Status GraphRunner::Run(StepLauncher& launcher, uint64_t binding) {
  if (have_graph_ && binding != binding_) {
    launcher.DropGraph();
    have_graph_ = false;
    mode_ = Mode::kWarmup;
  }
  switch (mode_) {
    case Mode::kEager:
      return RunEager(launcher);
    case Mode::kWarmup: {
      absl::Status s = RunEager(launcher);
      if (s.ok()) mode_ = Mode::kCapture;
      return s;
    }
    case Mode::kCapture: {
      if (absl::Status begin = launcher.BeginCapture(); !begin.ok())
        return FallBack(launcher, begin);
      absl::Status step = launcher.Enqueue();
      absl::Status end = launcher.EndCapture(step.ok());
      // Under capture nothing ran: a failed enqueue is the step's own error
      // (try capturing again next time); a failed capture means eager steps.
      if (!step.ok()) return step;
      if (!end.ok()) return FallBack(launcher, end);
      have_graph_ = true;
      binding_ = binding;
      ++captures_;
      mode_ = Mode::kReplay;
      ++replays_;
      return launcher.Replay();
    }
    case Mode::kReplay:
      ++replays_;
      return launcher.Replay();
  }
  return absl::InternalError("unreachable graph runner mode");
}

}  // namespace stepc
