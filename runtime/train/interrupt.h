// SIGTERM or SIGINT while a job trains (a scheduler preempting it, Ctrl-C):
// the first asks the trainer to stop after the step under way, with a
// checkpoint to resume from; a second one ends the process as before.

#ifndef STEPC_RUNTIME_TRAIN_INTERRUPT_H_
#define STEPC_RUNTIME_TRAIN_INTERRUPT_H_

#include <signal.h>

#include <memory>

namespace stepc {

// Catches SIGTERM and SIGINT while it lives (one-shot: the handler resets
// itself, so a second signal takes its default action); restores the
// previous handlers when it goes. The handler runs on a stack of its own
// (sigaltstack): oneDNN's JIT GEMMs (libdnnl before 3.11, Debian's 2.7)
// point rsp into their heap workspace while they run, and a signal frame
// the kernel pushed there corrupted the heap (an abort at a later free).
// The kernel hands a signal sent to the process to its main thread first,
// the one that makes the guard; a thread the guard cannot reach (a worker
// of OpenMP or OpenBLAS) takes one only while the main thread blocks it.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  struct sigaction previous_term_, previous_int_;
  std::unique_ptr<char[]> stack_;
  stack_t previous_stack_;
};

// The size of the guard's signal stack (also what tests check).
inline constexpr size_t kInterruptStackBytes = 64 << 10;

// The signal caught since the guard was made (0: none).
int StopSignal();

// Gives the calling thread an alternate signal stack of its own for as
// long as it lives, unless it has one: a host's handler installed with
// SA_ONSTACK (CPython installs all of its so) then runs there and not
// where oneDNN's JIT GEMMs point rsp (see InterruptGuard). Every C API
// call on a session makes sure of it (a Ctrl-C in Python during a step).
void EnsureSignalStack();

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_INTERRUPT_H_
