#include "system/daemon_signals.h"

#include <pthread.h>

#include <csignal>

namespace jitd::daemon {
namespace {

sigset_t DaemonSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace

void DaemonSignals::Block() {
  const sigset_t set = DaemonSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void DaemonSignals::Unblock() {
  const sigset_t set = DaemonSet();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

int DaemonSignals::Wait() {
  const sigset_t set = DaemonSet();
  int signal = 0;
  while (sigwait(&set, &signal) != 0) {
  }
  return signal;
}

}  // namespace jitd::daemon
