// One warm-up: many instantiations through KernelService, a bounded number
// in flight, each answer reported as it comes. The Warm RPC and `jitd warm`
// both run theirs with it, so that the two warm the same way: the same
// priority, the same pinning, the same counting.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "serving/kernel_service.h"

namespace jitd::serving {

// How one item ended.
enum class WarmOutcome { kCompiled, kCached, kFailed };

struct WarmCounts {
  std::uint32_t done = 0;
  std::uint32_t compiled = 0;
  std::uint32_t cached = 0;
  std::uint32_t failed = 0;
};

struct WarmRunOptions {
  // Items in flight at once, at least 1.
  std::size_t concurrency = 1;
  // The context every item is submitted with; its priority should be
  // compiler::Priority::kWarm. Its deadline and `cancelled` are watched by
  // the run (every poll_interval while it waits), not by the service.
  CallContext call;
  std::chrono::milliseconds poll_interval{50};
};

// Runs items 0..total-1 (`item(i)` gives each one's request). A manifest
// instantiation (a request without extra options) that is answered is
// pinned, so the cache's budget keeps what a warm-up put there. `report`
// runs on the calling thread for every answer, in the order they finish,
// with the counts so far (this item included); it returns false to stop
// the run (the caller's stream is gone). The run also stops when
// options.call's deadline passes or `cancelled` says so. An item the
// service refuses at once with RESOURCE_EXHAUSTED (options.call.peer's share
// of new compiles is held, KernelService::Options::max_compiles_per_peer)
// is not an answer: it waits, and is submitted again once an item of the
// run finishes (or every poll_interval while none is in flight), before
// any later item. Items still in
// flight then are withdrawn (cancelled unless another caller wants them)
// and never reported. Returns the counts; done < total means it stopped.
WarmCounts RunWarm(KernelService& service, std::size_t total,
                   const std::function<manifest::KernelRequest(std::size_t)>& item, const WarmRunOptions& options,
                   const std::function<bool(std::size_t i, const absl::StatusOr<KernelAnswer>& answer,
                                            WarmOutcome outcome, const WarmCounts& counts)>& report);

}  // namespace jitd::serving
