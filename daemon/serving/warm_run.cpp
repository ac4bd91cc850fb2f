#include "serving/warm_run.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>

#include "spdlog/spdlog.h"

namespace jitd::serving {
namespace {

using Steady = std::chrono::steady_clock;
using Answer = std::pair<std::size_t, absl::StatusOr<KernelAnswer>>;

// Answers arrive on the service's threads; the run takes them on its own.
// Shared, so that an answer arriving after the run returned has a place.
struct Finished {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Answer> answers;
};

void PinIfManifest(KernelService& service, const manifest::KernelRequest& item, const std::string& key) {
  // Bounded by the manifest, and what a strict server relies on finding
  // after a restart. Ad-hoc ones (-D options) stay evictable, so they
  // cannot push these out.
  if (!item.options.empty()) return;
  if (absl::Status pinned = service.Pin(key); !pinned.ok()) {
    // Served but not stored (a full disk): nothing on disk to keep.
    spdlog::debug("warm-up: {} not pinned: {}", key.substr(0, 12), pinned.ToString());
  }
}

// Which thread submits, and whether it is inside Submit now: an answer
// given there, at once, is a refusal of this submit (only that thread reads
// or writes `active` and `refused`). Shared, like Finished.
struct Submitting {
  std::thread::id thread;
  bool active = false;
  bool refused = false;
};

}  // namespace

WarmCounts RunWarm(KernelService& service, std::size_t total,
                   const std::function<manifest::KernelRequest(std::size_t)>& item, const WarmRunOptions& options,
                   const std::function<bool(std::size_t i, const absl::StatusOr<KernelAnswer>& answer,
                                            WarmOutcome outcome, const WarmCounts& counts)>& report) {
  const std::size_t concurrency = std::max<std::size_t>(options.concurrency, 1);
  CallContext call = options.call;
  const std::function<bool()> cancelled = std::move(call.cancelled);
  call.cancelled = nullptr;  // not polled by Submit: this loop watches the caller
  const auto gone = [&] { return Steady::now() >= call.deadline || (cancelled && cancelled()); };

  auto finished = std::make_shared<Finished>();
  auto submitting = std::make_shared<Submitting>();
  submitting->thread = std::this_thread::get_id();
  std::unordered_map<std::size_t, std::shared_ptr<Flight>> waiting;  // item -> its flight, until answered
  std::size_t next = 0, outstanding = 0;
  std::optional<std::size_t> deferred;  // refused for want of a share: submitted again before `next`
  WarmCounts counts;
  bool stop = false;
  while (!stop) {
    while (outstanding < concurrency && (deferred || next < total)) {
      const std::size_t i = deferred.value_or(next);
      submitting->active = true;
      std::shared_ptr<Flight> flight =
          service.Submit(item(i), call, [finished, submitting, i](absl::StatusOr<KernelAnswer> a) {
            // Answered on this thread inside Submit: refused before anything started.
            if (std::this_thread::get_id() == submitting->thread && submitting->active &&
                absl::IsResourceExhausted(a.status())) {
              submitting->refused = true;
              return;
            }
            std::lock_guard lock(finished->mu);
            finished->answers.emplace_back(i, std::move(a));
            finished->cv.notify_one();
          });
      submitting->active = false;
      if (submitting->refused) {
        submitting->refused = false;
        if (!deferred) ++next;
        deferred = i;
        break;
      }
      if (deferred) {
        deferred.reset();
      } else {
        ++next;
      }
      ++outstanding;
      if (flight != nullptr) waiting.emplace(i, std::move(flight));
    }
    if (outstanding == 0 && !deferred) break;
    std::optional<Answer> got;
    {
      std::unique_lock lock(finished->mu);
      finished->cv.wait_for(lock, options.poll_interval, [&] { return !finished->answers.empty(); });
      if (!finished->answers.empty()) {
        got.emplace(std::move(finished->answers.front()));
        finished->answers.pop_front();
      }
    }
    if (!got) {
      stop = gone();
      continue;
    }
    --outstanding;
    waiting.erase(got->first);
    const absl::StatusOr<KernelAnswer>& answer = got->second;
    WarmOutcome outcome = WarmOutcome::kFailed;
    if (answer.ok()) {
      PinIfManifest(service, item(got->first), answer->key);
      outcome = answer->origin == Origin::kCompiled ? WarmOutcome::kCompiled : WarmOutcome::kCached;
    }
    ++counts.done;
    ++(outcome == WarmOutcome::kCompiled ? counts.compiled
       : outcome == WarmOutcome::kCached ? counts.cached
                                         : counts.failed);
    stop = !report(got->first, answer, outcome, counts) || (cancelled && cancelled());
  }
  for (auto& [i, flight] : waiting) service.Withdraw(*flight);
  return counts;
}

}  // namespace jitd::serving
