// The RPC handlers running now, so that a drain can tell calls in flight
// (which it waits for) from clients that are merely connected (which it
// need not wait for).
//
// Why: gRPC's graceful Shutdown(deadline) also waits for every client to
// close its connection after the GOAWAY, and an idle client channel (an
// inference server holding one open) does not do that until it next makes a
// call, so every SIGTERM would take the whole drain deadline. The daemon
// waits for this count to reach zero instead, then closes what is left.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace jitd::daemon {

class InFlightCalls {
 public:
  // Counts one call for as long as it lives.
  class Scope {
   public:
    explicit Scope(InFlightCalls& calls);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    InFlightCalls& calls_;
  };

  // Waits until no call runs or `deadline` passes; true when none runs.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline);

  uint64_t count() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable idle_;
  uint64_t count_ = 0;
};

}  // namespace jitd::daemon
