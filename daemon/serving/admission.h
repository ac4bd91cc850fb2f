// Admission: the daemon's one policy on who may take what, and the words
// of every refusal. Each bound is here, with the flag behind it, and each
// refusal is RESOURCE_EXHAUSTED naming the bound, what holds it and what to
// do:
//
//   calls      GetKernel, Warm and ListKernels calls one peer has in flight
//              (--max-calls-per-peer): one client cannot take every thread
//              of the server.                              AdmitCall()
//   flights    new compiles one peer has queued or running, fleet waits
//              included (PeerFlightShare: the workers and half of
//              --max-queue): one client cannot take the whole queue.
//   prefetch   PREFETCH-started compiles: at most half of --max-queue, and
//              none while the queue is full, so a flood of them never
//              refuses a request that waits for its kernel.  AdmitFlight()
//   queue      compiles waiting at once, for a worker (the pool's queue) or
//              for another daemon's compile of the key (--max-queue).
//                                                         AdmitFleetWait()
//
// A request that joins a flight already running is never refused: it adds
// no compile. What a peer is: a Unix client's user, a TCP client's address,
// serving::kRewarmPeer for the daemon's own warm-ups; an empty name is one
// identity of its own (kUnnamedPeer), never a way around a share.
//
// Every admission is a Ticket that gives its place back when released or
// destroyed. Thread safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace jitd::serving {

// Whom an empty peer name is counted as.
inline constexpr char kUnnamedPeer[] = "(a caller without a peer name)";

class Admission {
 public:
  struct Options {
    size_t max_calls_per_peer = 0;    // 0 = no bound
    size_t max_flights_per_peer = 0;  // 0 = no bound
    size_t max_queue = 0;             // 0 = no queue or prefetch bound
  };

  struct Stats {
    uint64_t calls_refused = 0;
    uint64_t prefetches_refused = 0;    // PREFETCHes refused, by any bound
    uint64_t peer_flights_refused = 0;  // new compiles refused by a peer's share
    uint64_t fleet_waits_refused = 0;   // waits on another daemon refused (queue full)
    uint64_t fleet_waiting = 0;         // flights waiting on another daemon now
    uint64_t prefetching = 0;           // PREFETCH-started flights now
  };

  // The daemon's per-peer share of new compiles: the workers' worth and
  // half the queue, so the other half stays for everyone else; a queue of
  // fewer than 4 has no half worth keeping (0: no share bound).
  static size_t PeerFlightShare(size_t workers, size_t max_queue);

  // `queue_depth` says how many compiles wait for a worker now (the pool's
  // queue); it is called on PREFETCH and fleet-wait admissions only.
  Admission(Options options, std::function<size_t()> queue_depth);
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

  // A place taken; given back by Release() or the destructor. Outlives
  // nothing: the Admission that issued it must outlive it.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept;
    Ticket& operator=(Ticket&& other) noexcept;
    ~Ticket() { Release(); }
    void Release();
    bool held() const { return owner_ != nullptr; }

   private:
    friend class Admission;
    enum What : unsigned { kCall = 1, kPeerFlight = 2, kPrefetch = 4, kFleetWait = 8 };
    Ticket(Admission* owner, unsigned what, std::string peer) : owner_(owner), what_(what), peer_(std::move(peer)) {}
    Admission* owner_ = nullptr;
    unsigned what_ = 0;
    std::string peer_;
  };

  // One more call of `peer` (the calls bound).
  absl::Status AdmitCall(const std::string& peer, Ticket* ticket);
  // A new flight `peer` starts (PREFETCH: `prefetch`): the prefetch and
  // queue bounds first, then the peer's share.
  absl::Status AdmitFlight(const std::string& peer, bool prefetch, Ticket* ticket);
  // A flight about to wait on another daemon's lease for `kernel`: a
  // queued compile too, so it counts against the queue bound.
  absl::Status AdmitFleetWait(std::string_view kernel, Ticket* ticket);

  // The share of new compiles one peer has (0 = no bound).
  size_t max_flights_per_peer() const { return options_.max_flights_per_peer; }
  Stats stats() const;

 private:
  static std::string PeerName(const std::string& peer);
  // Takes one of `peer`'s places in `counts` unless it has `bound`.
  bool Take(std::map<std::string, size_t>& counts, const std::string& peer, size_t bound, size_t* had);
  void Give(std::map<std::string, size_t>& counts, const std::string& peer);
  void Release(unsigned what, const std::string& peer);

  const Options options_;
  const std::function<size_t()> queue_depth_;
  std::mutex mu_;
  std::map<std::string, size_t> calls_;    // guarded by mu_
  std::map<std::string, size_t> flights_;  // guarded by mu_
  std::atomic<size_t> fleet_waiting_{0};
  std::atomic<size_t> prefetching_{0};
  std::atomic<uint64_t> calls_refused_{0}, prefetches_refused_{0}, peer_flights_refused_{0}, fleet_waits_refused_{0};
};

}  // namespace jitd::serving
