#include "rpc/in_flight_calls.h"

namespace jitd::daemon {

InFlightCalls::Scope::Scope(InFlightCalls& calls) : calls_(calls) {
  std::lock_guard lock(calls_.mu_);
  ++calls_.count_;
}

InFlightCalls::Scope::~Scope() {
  std::lock_guard lock(calls_.mu_);
  if (--calls_.count_ == 0) calls_.idle_.notify_all();
}

bool InFlightCalls::WaitIdle(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  return idle_.wait_until(lock, deadline, [this] { return count_ == 0; });
}

uint64_t InFlightCalls::count() const {
  std::lock_guard lock(mu_);
  return count_;
}

}  // namespace jitd::daemon
