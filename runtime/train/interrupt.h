// SIGTERM or SIGINT while a job trains (a scheduler preempting it, Ctrl-C):
// the first asks the trainer to stop after the step under way, with a
// checkpoint to resume from; a second one ends the process as before.

#ifndef STEPC_RUNTIME_TRAIN_INTERRUPT_H_
#define STEPC_RUNTIME_TRAIN_INTERRUPT_H_

#include <signal.h>

namespace stepc {

// Catches SIGTERM and SIGINT while it lives (one-shot: the handler resets
// itself, so a second signal takes its default action); restores the
// previous handlers when it goes.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  struct sigaction previous_term_, previous_int_;
};

// The signal caught since the guard was made (0: none).
int StopSignal();

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_INTERRUPT_H_
