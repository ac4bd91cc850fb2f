// ResolverSlot: the resolver the engine serves with now, and its one
// writer. Requests read it without waiting for an update; updates run one
// at a time, each built on what the last one swapped in (a toolkit change
// and a reload never undo each other); requests in flight finish with the
// resolver they started with.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <functional>
#include <memory>
#include <mutex>

#include "absl/status/statusor.h"
#include "manifest/manifest.h"

namespace jitd::serving {

class ResolverSlot {
 public:
  using Ptr = std::shared_ptr<const manifest::Resolver>;
  // Gets the resolver served now and returns the one to serve instead (the
  // same one: nothing changes; an error: nothing changes, the error is
  // returned). Runs while no other update does; must not update the slot.
  using Update = std::function<absl::StatusOr<Ptr>(const Ptr& current)>;

  explicit ResolverSlot(Ptr resolver) : resolver_(std::move(resolver)) {}

  Ptr current() const {
    std::lock_guard lock(mu_);
    return resolver_;
  }

  absl::StatusOr<Ptr> Apply(const Update& next) {
    std::lock_guard update(update_mu_);
    absl::StatusOr<Ptr> made = next(current());
    if (!made.ok()) return made.status();
    if (*made == nullptr) return absl::InternalError("a resolver update made no resolver");
    std::lock_guard lock(mu_);
    resolver_ = *made;
    return made;
  }

 private:
  // Held by Apply from reading the resolver to swapping it: one update at a
  // time. mu_ is held only to read or swap the pointer, so requests never
  // wait for an update.
  std::mutex update_mu_;
  mutable std::mutex mu_;
  Ptr resolver_;  // guarded by mu_
};

}  // namespace jitd::serving
