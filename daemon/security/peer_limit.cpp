#include "security/peer_limit.h"

#include "jitd/base/text.h"

namespace jitd::daemon {

PeerLimit::Slot::~Slot() {
  if (owner_ != nullptr) owner_->Release(peer_);
}

absl::Status PeerLimit::Acquire(const std::string& peer, Slot* slot) {
  if (max_ == 0) return absl::OkStatus();
  {
    std::lock_guard lock(mu_);
    size_t& n = in_flight_[peer];
    if (n >= max_) {
      return absl::ResourceExhaustedError(
          text::Cat(peer, " has ", n, " calls in flight, the most one peer may have (--max-calls-per-peer ", max_,
                    "); retry when some have finished"));
    }
    ++n;
  }
  *slot = Slot(this, peer);
  return absl::OkStatus();
}

void PeerLimit::Release(const std::string& peer) {
  std::lock_guard lock(mu_);
  auto it = in_flight_.find(peer);
  if (it != in_flight_.end() && --it->second == 0) in_flight_.erase(it);
}

}  // namespace jitd::daemon
