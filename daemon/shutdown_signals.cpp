#include "shutdown_signals.h"

#include <pthread.h>

#include <csignal>

namespace jitd::daemon {
namespace {

sigset_t ShutdownSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void ShutdownSignals::Block() {
  const sigset_t set = ShutdownSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int ShutdownSignals::Wait() {
  const sigset_t set = ShutdownSet();
  int signal = 0;
  while (sigwait(&set, &signal) != 0) {
  }
  return signal;
}

}  // namespace jitd::daemon
