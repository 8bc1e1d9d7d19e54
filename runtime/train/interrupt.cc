#include "runtime/train/interrupt.h"

#include <csignal>

namespace stepc {
namespace {

volatile std::sig_atomic_t caught = 0;

void Catch(int signal) { caught = signal; }

}  // namespace

InterruptGuard::InterruptGuard() {
  caught = 0;
  struct sigaction action = {};
  action.sa_handler = Catch;
  sigemptyset(&action.sa_mask);
  // Interrupted system calls resume; the next signal is the default's.
  action.sa_flags = SA_RESTART | SA_RESETHAND;
  sigaction(SIGTERM, &action, &previous_term_);
  sigaction(SIGINT, &action, &previous_int_);
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGTERM, &previous_term_, nullptr);
  sigaction(SIGINT, &previous_int_, nullptr);
}

int StopSignal() { return caught; }

}  // namespace stepc
