#include "serving/flight_table.h"

#include <algorithm>

#include "jitd/base/text.h"

namespace jitd::serving {

using Clock = std::chrono::steady_clock;
using text::Cat;

FlightTable::JoinResult FlightTable::Join(const std::string& key, Mode mode, const std::function<bool()>& present) {
  std::lock_guard lock(mu_);
  if (auto it = flights_.find(key); it != flights_.end() && JoinLocked(*it->second, mode)) {
    return {Joined::kFollower, it->second, {}};
  }
  // No flight, or one its last waiter cancelled (it leaves the table once
  // its compile has answered): a new flight replaces it. A flight ends by
  // publishing (Finish) and only then leaving the table, both under this
  // lock: look again first.
  if (present && present()) return {Joined::kPresent, nullptr, {}};
  if (auto failure = RecentFailureLocked(key)) {
    return {Joined::kRemembered, nullptr,
            absl::Status(failure->code(), Cat("(compile failure remembered for up to ", options_.negative_ttl.count(),
                                              " s) ", failure->message()))};
  }
  if (mode == Mode::kCachedOnly) return {Joined::kAbsent, nullptr, {}};
  auto flight = std::make_shared<Flight>(key);
  if (mode == Mode::kCompile) flight->waiters_ = 1;  // the leader waits from the first moment
  if (mode == Mode::kPrefetch) flight->wanted_without_waiters_ = true;
  flights_[key] = flight;
  return {Joined::kLeader, flight, {}};
}

bool FlightTable::JoinLocked(Flight& flight, Mode mode) {
  // Under the table's lock and the flight's together: the last waiter of a
  // flight cancels it under the flight's lock, so a request either joins
  // before that (and keeps the compile wanted) or sees it cancelled and
  // starts its own. Joining a cancelled flight would hand a caller that
  // never gave up a CANCELLED answer.
  std::lock_guard lock(flight.mu_);
  if (flight.cancel_->cancelled() || flight.done_) return false;
  if (mode == Mode::kCompile) ++flight.waiters_;  // CACHED_ONLY does not wait; PREFETCH is not a waiter
  if (mode == Mode::kPrefetch) flight.wanted_without_waiters_ = true;
  return true;
}

void FlightTable::Finish(const std::shared_ptr<Flight>& flight, FlightResult result, bool remember,
                         const std::function<void()>& publish) {
  {
    std::lock_guard lock(mu_);
    if (publish) publish();
    if (remember && !result.entry.ok()) RememberFailureLocked(flight->key(), result.entry.status());
    // Only this flight's own entry: a cancelled flight may have been
    // replaced by a newer one for the same key.
    if (auto it = flights_.find(flight->key()); it != flights_.end() && it->second == flight) flights_.erase(it);
  }
  std::vector<std::function<void(const FlightResult&)>> callbacks;
  {
    std::lock_guard lock(flight->mu_);
    flight->result_ = std::move(result);
    flight->done_ = true;
    callbacks.swap(flight->on_done_);
  }
  flight->cv_.notify_all();
  // result_ no longer changes once done_: read without the lock.
  for (const auto& callback : callbacks) callback(flight->result_);
}

void FlightTable::OnDone(Flight& flight, std::function<void(const FlightResult&)> done) {
  {
    std::lock_guard lock(flight.mu_);
    if (!flight.done_) {
      flight.on_done_.push_back(std::move(done));
      return;
    }
  }
  done(flight.result_);
}

void FlightTable::Withdraw(Flight& flight) {
  std::lock_guard lock(flight.mu_);
  if (flight.done_) return;
  --flight.waiters_;
  if (flight.waiters_ <= 0 && !flight.wanted_without_waiters_) flight.cancel_->Cancel();
}

FlightTable::WaitResult FlightTable::Wait(Flight& flight, Clock::time_point deadline,
                                          const std::function<bool()>& cancelled) {
  std::unique_lock lock(flight.mu_);
  while (!flight.done_) {
    const bool gone = cancelled && cancelled();
    if (gone || Clock::now() >= deadline) {
      --flight.waiters_;
      WaitResult out;
      out.caller_gone = gone;
      out.still_wanted = flight.waiters_ > 0 || flight.wanted_without_waiters_;
      if (!out.still_wanted) flight.cancel_->Cancel();
      return out;
    }
    flight.cv_.wait_until(lock, std::min(deadline, Clock::now() + options_.poll_interval));
  }
  --flight.waiters_;
  return {flight.result_, false, false};
}

size_t FlightTable::size() const {
  std::lock_guard lock(mu_);
  return flights_.size();
}

std::optional<absl::Status> FlightTable::RecentFailureLocked(const std::string& key) {
  auto it = failures_.find(key);
  if (it == failures_.end()) return std::nullopt;
  if (Clock::now() >= it->second.expires) {
    failures_.erase(it);
    return std::nullopt;
  }
  return it->second.status;
}

void FlightTable::RememberFailureLocked(const std::string& key, const absl::Status& status) {
  const auto now = Clock::now();
  if (failures_.size() >= options_.negative_entries) {
    for (auto it = failures_.begin(); it != failures_.end();)
      it = it->second.expires <= now ? failures_.erase(it) : std::next(it);
    if (failures_.size() >= options_.negative_entries) failures_.erase(failures_.begin());
  }
  failures_[key] = {status, now + options_.negative_ttl};
}

}  // namespace jitd::serving
