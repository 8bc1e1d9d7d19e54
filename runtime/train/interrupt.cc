#include "runtime/train/interrupt.h"

#include <csignal>

namespace stepc {
namespace {

volatile std::sig_atomic_t caught = 0;

void Catch(int signal) { caught = signal; }

// Makes `memory` (kInterruptStackBytes) the calling thread's signal stack.
void UseSignalStack(char* memory, stack_t* previous) {
  stack_t stack = {};
  stack.ss_sp = memory;
  stack.ss_size = kInterruptStackBytes;
  sigaltstack(&stack, previous);
}

}  // namespace

InterruptGuard::InterruptGuard() : stack_(new char[kInterruptStackBytes]) {
  caught = 0;
  UseSignalStack(stack_.get(), &previous_stack_);
  struct sigaction action = {};
  action.sa_handler = Catch;
  sigemptyset(&action.sa_mask);
  // Interrupted system calls resume; the next signal is the default's; the
  // frame goes on the stack above, never where the interrupted code's rsp
  // points (interrupt.h).
  action.sa_flags = SA_RESTART | SA_RESETHAND | SA_ONSTACK;
  sigaction(SIGTERM, &action, &previous_term_);
  sigaction(SIGINT, &action, &previous_int_);
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGTERM, &previous_term_, nullptr);
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaltstack(&previous_stack_, nullptr);
}

int StopSignal() { return caught; }

namespace {

// A thread's own signal stack, switched off before its memory goes.
struct ThreadSignalStack {
  std::unique_ptr<char[]> memory;
  bool checked = false;
  ~ThreadSignalStack() {
    stack_t current;
    if (!memory || sigaltstack(nullptr, &current) != 0 || current.ss_sp != memory.get()) return;
    stack_t off = {};
    off.ss_flags = SS_DISABLE;
    sigaltstack(&off, nullptr);
  }
};

thread_local ThreadSignalStack thread_stack;

}  // namespace

void EnsureSignalStack() {
  if (thread_stack.checked) return;
  thread_stack.checked = true;
  stack_t current;
  if (sigaltstack(nullptr, &current) != 0 || !(current.ss_flags & SS_DISABLE)) return;
  thread_stack.memory.reset(new char[kInterruptStackBytes]);
  UseSignalStack(thread_stack.memory.get(), nullptr);
}

}  // namespace stepc
