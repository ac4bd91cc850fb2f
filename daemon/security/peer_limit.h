// A bound on the calls one peer has in flight at once, so that one client
// (a runaway retry loop, a misbehaving rank) cannot take every thread of
// the server. A peer is HOST:PORT of a TCP client (gRPC's name) and the
// user (uid) of a Unix socket client (unix_acceptor.h's PeerOf).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/status.h"

namespace jitd::daemon {

class PeerLimit {
 public:
  // At most `max_per_peer` calls per peer; 0 = no bound.
  explicit PeerLimit(size_t max_per_peer) : max_(max_per_peer) {}

  // Holds one of a peer's places while it lives.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept : owner_(other.owner_), peer_(std::move(other.peer_)) { other.owner_ = nullptr; }
    Slot& operator=(Slot&& other) noexcept {
      if (this != &other) {
        if (owner_ != nullptr) owner_->Release(peer_);
        owner_ = other.owner_;
        peer_ = std::move(other.peer_);
        other.owner_ = nullptr;
      }
      return *this;
    }
    ~Slot();

   private:
    friend class PeerLimit;
    Slot(PeerLimit* owner, std::string peer) : owner_(owner), peer_(std::move(peer)) {}
    PeerLimit* owner_ = nullptr;
    std::string peer_;
  };

  // A place for `peer`, or RESOURCE_EXHAUSTED naming the peer and the bound
  // (the flag that sets it) when it has max_per_peer calls in flight.
  absl::Status Acquire(const std::string& peer, Slot* slot);

  size_t max_per_peer() const { return max_; }

 private:
  void Release(const std::string& peer);
  const size_t max_;
  std::mutex mu_;
  std::map<std::string, size_t> in_flight_;
};

}  // namespace jitd::daemon
