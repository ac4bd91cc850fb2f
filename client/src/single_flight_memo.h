// A thread-safe memo whose misses are single-flight: the client's
// per-process answer to "the second request for a spec costs no RPC".
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "absl/status/statusor.h"

namespace jitd::client_detail {

template <typename Value>
class SingleFlightMemo {
 public:
  using Result = absl::StatusOr<std::shared_ptr<const Value>>;
  struct Produced {
    Result result;
    // Whether a successful result is remembered for later calls (answers
    // that may change soon, such as the fallback's, are not).
    bool keep = true;
  };

  // The remembered value for `key`, or the result of running `produce`.
  // Callers that ask for a key while another caller's `produce` runs wait
  // for it and share its result, so one miss runs `produce` once however
  // many threads ask. Errors are handed to the waiting callers and never
  // remembered. `*produced` (may be null) says whether this call ran it.
  Result Get(const std::string& key, const std::function<Produced()>& produce, bool* produced = nullptr) {
    std::promise<Result> promise;
    {
      std::unique_lock lock(mu_);
      if (auto kept = kept_.find(key); kept != kept_.end()) {
        if (produced != nullptr) *produced = false;
        return kept->second;
      }
      if (auto flight = in_flight_.find(key); flight != in_flight_.end()) {
        std::shared_future<Result> shared = flight->second;
        lock.unlock();
        if (produced != nullptr) *produced = false;
        return shared.get();
      }
      in_flight_.emplace(key, promise.get_future().share());
    }
    Produced answer = produce();
    {
      std::lock_guard lock(mu_);
      in_flight_.erase(key);
      if (answer.result.ok() && answer.keep) kept_.emplace(key, *answer.result);
    }
    promise.set_value(answer.result);
    if (produced != nullptr) *produced = true;
    return answer.result;
  }

  // The remembered value for `key`, or null; never waits or produces.
  std::shared_ptr<const Value> Find(const std::string& key) const {
    std::lock_guard lock(mu_);
    auto kept = kept_.find(key);
    return kept == kept_.end() ? nullptr : kept->second;
  }

  // Remembers `value` for `key` unless a value is remembered already (the
  // first one stays, so every caller keeps seeing the same object).
  void Remember(const std::string& key, std::shared_ptr<const Value> value) {
    std::lock_guard lock(mu_);
    kept_.emplace(key, std::move(value));
  }

  // How many values are remembered.
  size_t size() const {
    std::lock_guard lock(mu_);
    return kept_.size();
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const Value>> kept_;
  std::unordered_map<std::string, std::shared_future<Result>> in_flight_;
};

}  // namespace jitd::client_detail
