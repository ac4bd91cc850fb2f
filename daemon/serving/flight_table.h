// FlightTable: single flight, cancellation and the negative memo of the
// request path, by content key. It knows nothing of tiers or compiles, so
// it is tested alone (tests/serving/test_serving_flight_table.cpp).
//
// A Flight is the one piece of work (a wait on the fleet, a compile, its
// store) that answers every request for its key while it runs:
//  * Join() either joins the key's flight, or starts one (the caller is
//    then its leader and must Finish() it), or says why neither is needed
//    (the entry is present now, a failure is remembered, CACHED_ONLY).
//  * A COMPILE request is a waiter; a PREFETCH wants the flight without
//    waiting; a CACHED_ONLY request never waits.
//  * Wait() blocks until the flight is finished, the caller's deadline, or
//    the caller going away. The last waiter to give up, when no PREFETCH
//    wants the flight, fires its CancelFlag: the compile is abandoned.
//  * A waiter may instead ask to be called back (OnDone) and park no
//    thread; it gives up with Withdraw(), which cancels like Wait() does.
//  * Finish() runs `publish` under the table's lock before the flight
//    leaves the table, so a request arriving then either joins the flight
//    or finds the entry present (Join's `present`): it never starts a
//    second compile of a key that was just compiled.
//  * A failure the program caused (Finish's `remember`) is answered from
//    memory for `negative_ttl`, so a broken kernel is not recompiled on
//    every request.
//
// jitd has one single flight per scope, each written once: this table (in
// one daemon, one compile per key however many requests wait), the remote
// tier's leases (remote/remote.h: one compile per key across the fleet,
// taken by this table's leader, never by a waiter) and the client's
// SingleFlightMemo (client/src/single_flight_memo.h: one RPC per spec in a
// process). They share no code because they guard against different
// things: a waiter that gives up, a daemon that dies holding a lease, and
// nothing but duplicate calls.
//
// Thread safety: every method may be called from any thread. Lock order:
// the table's lock before a flight's; a CancelFlag is fired with no lock
// of the table held.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/worker_pool.h"
#include "jitd/cache.h"
#include "serving/tier.h"

namespace jitd::serving {

enum class Mode {
  kCompile,     // compile on a miss
  kCachedOnly,  // NOT_FOUND on a miss, never compile
  kPrefetch,    // answer at once; on a miss start a compile nobody waits for
};

// What a finished flight answers: the verified entry and where it came
// from (kCompiled, or kRemote when the fleet answered), or an error.
struct FlightResult {
  absl::StatusOr<std::shared_ptr<const cache::Entry>> entry = absl::UnknownError("not finished");
  Origin origin = Origin::kCompiled;
};

class Flight {
 public:
  explicit Flight(std::string key) : key_(std::move(key)) {}
  const std::string& key() const { return key_; }
  // Fired when nobody wants the flight any more; pass it to the compile.
  const std::shared_ptr<compiler::CancelFlag>& cancel() const { return cancel_; }
  bool cancelled() const { return cancel_->cancelled(); }

 private:
  friend class FlightTable;
  const std::string key_;
  const std::shared_ptr<compiler::CancelFlag> cancel_ = std::make_shared<compiler::CancelFlag>();
  // Guarded by mu_.
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  FlightResult result_;
  std::vector<std::function<void(const FlightResult&)>> on_done_;  // run once, after done_
  int waiters_ = 0;
  bool wanted_without_waiters_ = false;  // a PREFETCH asked for it
};

class FlightTable {
 public:
  struct Options {
    std::chrono::seconds negative_ttl{30};
    // Failures remembered at most (expired ones go first, then the oldest).
    size_t negative_entries = 4096;
    // How often a waiting caller checks whether it has gone away.
    std::chrono::milliseconds poll_interval{20};
  };
  explicit FlightTable(Options options) : options_(options) {}

  enum class Joined {
    kLeader,      // a new flight: the caller runs it and must Finish() it
    kFollower,    // an existing flight
    kPresent,     // `present` said the entry is there now: look again
    kRemembered,  // a recent failure (JoinResult::failure)
    kAbsent,      // CACHED_ONLY and nothing running or remembered
  };
  struct JoinResult {
    Joined kind = Joined::kAbsent;
    std::shared_ptr<Flight> flight;  // kLeader, kFollower
    absl::Status failure;            // kRemembered: the error, saying it is remembered
  };
  // `present` runs under the table's lock when no flight can be joined.
  JoinResult Join(const std::string& key, Mode mode, const std::function<bool()>& present);

  // Ends `flight`: `publish` (may be empty) runs under the table's lock,
  // then the result is remembered when `remember` (the program's own
  // failure), the flight leaves the table (unless a newer one replaced it)
  // and its waiters wake.
  void Finish(const std::shared_ptr<Flight>& flight, FlightResult result, bool remember,
              const std::function<void()>& publish);

  struct WaitResult {
    std::optional<FlightResult> result;  // set unless the caller gave up
    bool caller_gone = false;            // gave up because `cancelled` said so (else: deadline)
    bool still_wanted = false;           // when it gave up: others still want the flight
  };
  // Waits as a waiter that Join() counted. `cancelled` (may be empty) is
  // polled every poll_interval.
  WaitResult Wait(Flight& flight, std::chrono::steady_clock::time_point deadline,
                  const std::function<bool()>& cancelled);

  // Calls `done` with the result once the flight is finished: at once, on
  // this thread, when it already is; else on the thread that finishes it
  // (after the waiters wake). The caller must be a waiter Join() counted
  // (Mode::kCompile); it gives up with Withdraw(), and `done` still runs.
  static void OnDone(Flight& flight, std::function<void(const FlightResult&)> done);
  // A waiter registered with OnDone() gives up: as Wait() at a deadline,
  // the last waiter of a flight nobody else wants cancels it. Once the
  // flight is finished, nothing.
  static void Withdraw(Flight& flight);

  // Flights running now.
  size_t size() const;

 private:
  // Joins `flight` unless its last waiter cancelled it. Requires mu_.
  static bool JoinLocked(Flight& flight, Mode mode);
  std::optional<absl::Status> RecentFailureLocked(const std::string& key);
  void RememberFailureLocked(const std::string& key, const absl::Status& status);

  struct Failure {
    absl::Status status;
    std::chrono::steady_clock::time_point expires;
  };
  const Options options_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<Flight>> flights_;  // guarded by mu_
  std::map<std::string, Failure> failures_;                           // guarded by mu_
};

}  // namespace jitd::serving
