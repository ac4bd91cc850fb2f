#include "serving/admission.h"

#include <algorithm>
#include <utility>

#include "jitd/base/text.h"

namespace jitd::serving {

using text::Cat;

Admission::Ticket::Ticket(Ticket&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), what_(other.what_), peer_(std::move(other.peer_)) {}

Admission::Ticket& Admission::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = std::exchange(other.owner_, nullptr);
    what_ = other.what_;
    peer_ = std::move(other.peer_);
  }
  return *this;
}

void Admission::Ticket::Release() {
  if (owner_ == nullptr) return;
  std::exchange(owner_, nullptr)->Release(what_, peer_);
}

size_t Admission::PeerFlightShare(size_t workers, size_t max_queue) {
  return max_queue >= 4 ? workers + max_queue / 2 : 0;
}

Admission::Admission(Options options, std::function<size_t()> queue_depth)
    : options_(options), queue_depth_(std::move(queue_depth)) {}

std::string Admission::PeerName(const std::string& peer) { return peer.empty() ? std::string(kUnnamedPeer) : peer; }

bool Admission::Take(std::map<std::string, size_t>& counts, const std::string& peer, size_t bound, size_t* had) {
  std::lock_guard lock(mu_);
  size_t& n = counts[peer];
  *had = n;
  if (n >= bound) {
    if (n == 0) counts.erase(peer);
    return false;
  }
  ++n;
  return true;
}

void Admission::Give(std::map<std::string, size_t>& counts, const std::string& peer) {
  std::lock_guard lock(mu_);
  auto it = counts.find(peer);
  if (it != counts.end() && --it->second == 0) counts.erase(it);
}

void Admission::Release(unsigned what, const std::string& peer) {
  if ((what & Ticket::kCall) != 0) Give(calls_, peer);
  if ((what & Ticket::kPeerFlight) != 0) Give(flights_, peer);
  if ((what & Ticket::kPrefetch) != 0) prefetching_.fetch_sub(1);
  if ((what & Ticket::kFleetWait) != 0) fleet_waiting_.fetch_sub(1);
}

absl::Status Admission::AdmitCall(const std::string& named, Ticket* ticket) {
  if (options_.max_calls_per_peer == 0) return absl::OkStatus();
  const std::string peer = PeerName(named);
  size_t had = 0;
  if (!Take(calls_, peer, options_.max_calls_per_peer, &had)) {
    calls_refused_.fetch_add(1, std::memory_order_relaxed);
    return absl::ResourceExhaustedError(Cat(peer, " has ", had,
                                            " calls in flight, the most one peer may have (--max-calls-per-peer ",
                                            options_.max_calls_per_peer, "); retry when some have finished"));
  }
  *ticket = Ticket(this, Ticket::kCall, peer);
  return absl::OkStatus();
}

absl::Status Admission::AdmitFlight(const std::string& named, bool prefetch, Ticket* ticket) {
  if (prefetch && options_.max_queue != 0) {
    const size_t share = std::max<size_t>(1, options_.max_queue / 2);
    absl::Status refused;
    if (const size_t prefetching = prefetching_.load(); prefetching >= share) {
      refused = absl::ResourceExhaustedError(
          Cat("PREFETCH refused: ", prefetching,
              " prefetched compiles are queued or running, the most this daemon "
              "takes (half of --max-queue ",
              options_.max_queue,
              "; the rest is kept for requests that wait for their kernel); ask again later, or with COMPILE"));
    } else if (const size_t waiting = queue_depth_() + fleet_waiting_.load(); waiting >= options_.max_queue) {
      refused = absl::ResourceExhaustedError(Cat("PREFETCH refused: the compile queue is full (", waiting,
                                                 " compiles waiting, --max-queue ", options_.max_queue, ")"));
    }
    if (!refused.ok()) {
      prefetches_refused_.fetch_add(1, std::memory_order_relaxed);
      return refused;
    }
  }
  unsigned what = 0;
  const std::string peer = PeerName(named);
  if (options_.max_flights_per_peer != 0) {
    size_t had = 0;
    if (!Take(flights_, peer, options_.max_flights_per_peer, &had)) {
      peer_flights_refused_.fetch_add(1, std::memory_order_relaxed);
      if (prefetch) prefetches_refused_.fetch_add(1, std::memory_order_relaxed);
      return absl::ResourceExhaustedError(
          Cat(peer, " has ", had, " new compiles queued or running, the most one client may start at once (",
              options_.max_flights_per_peer, ": the workers and half of --max-queue); retry when some have finished"));
    }
    what |= Ticket::kPeerFlight;
  }
  if (prefetch) {
    prefetching_.fetch_add(1);
    what |= Ticket::kPrefetch;
  }
  if (what != 0) *ticket = Ticket(this, what, peer);
  return absl::OkStatus();
}

absl::Status Admission::AdmitFleetWait(std::string_view kernel, Ticket* ticket) {
  if (options_.max_queue != 0) {
    if (const size_t waiting = queue_depth_() + fleet_waiting_.load(); waiting >= options_.max_queue) {
      fleet_waits_refused_.fetch_add(1, std::memory_order_relaxed);
      return absl::ResourceExhaustedError(Cat("compile queue is full (", waiting,
                                              " compiles waiting for a worker or for another daemon's compile, "
                                              "--max-queue ",
                                              options_.max_queue, "); not waiting for ", kernel));
    }
  }
  fleet_waiting_.fetch_add(1);
  *ticket = Ticket(this, Ticket::kFleetWait, "");
  return absl::OkStatus();
}

Admission::Stats Admission::stats() const {
  Stats s;
  s.calls_refused = calls_refused_.load(std::memory_order_relaxed);
  s.prefetches_refused = prefetches_refused_.load(std::memory_order_relaxed);
  s.peer_flights_refused = peer_flights_refused_.load(std::memory_order_relaxed);
  s.fleet_waits_refused = fleet_waits_refused_.load(std::memory_order_relaxed);
  s.fleet_waiting = fleet_waiting_.load();
  s.prefetching = prefetching_.load();
  return s;
}

}  // namespace jitd::serving
