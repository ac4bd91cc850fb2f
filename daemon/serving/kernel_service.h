// KernelService: the daemon's request path, independent of gRPC.
//
//   resolve (manifest) -> hot cache (memory) -> disk cache
//     -> remote tier (shared by the fleet, when configured) -> compile
//
// * Single flight: identical concurrent requests (same content key) share one
//   compile; every caller waits on it and gets its result.
// * A caller that gives up (deadline, cancellation) stops waiting at once;
//   when the last waiter of a compile gives up and nobody else wants it
//   (no PREFETCH), the compile is cancelled.
// * Compile failures (NVRTC rejected the program) are remembered for
//   Options::negative_ttl, so a broken kernel is not recompiled on every
//   request; each request still gets the error and the NVRTC log.
// * A compiled cubin is returned even when it cannot be stored on disk (full
//   disk); the failure is counted and logged.
// * Fleet-wide single flight (with a remote tier): a flight first asks the
//   remote tier; on a miss it takes the key's lease there and compiles,
//   writing the cubin back, or, when another daemon holds the lease, polls
//   until that daemon's cubin appears (or its lease lapses, and this daemon
//   takes over). A compile failure is shared the same way, for
//   negative_ttl. The remote tier failing never fails a request: the flight
//   compiles locally (remote.h's circuit breaker keeps that cheap).
// * The resolver can be swapped at run time (SIGHUP re-reads the kernels):
//   requests in flight finish with the one they started with.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "hot_cache.h"
#include "jitd/cache.h"
#include "manifest.h"
#include "remote.h"
#include "worker_pool.h"

namespace jitd::serving {

enum class Origin { kMemory, kDisk, kRemote, kCompiled, kNone };
const char* OriginName(Origin origin);

enum class Mode {
  kCompile,     // compile on a miss
  kCachedOnly,  // NOT_FOUND on a miss, never compile
  kPrefetch,    // answer at once; on a miss start a compile nobody waits for
};

// What the caller brings besides the request: when it stops waiting and how
// urgent it is.
struct CallContext {
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // Polled while waiting; true once the caller has gone away.
  std::function<bool()> cancelled;
  compiler::Priority priority = compiler::Priority::kLive;
};

struct KernelAnswer {
  std::string key;
  std::string kernel;
  std::string params;
  std::string arch;
  Origin origin = Origin::kNone;
  // The verified entry; null only for kNone (a PREFETCH that queued work).
  std::shared_ptr<const cache::Entry> entry;
};

class KernelService {
 public:
  struct Options {
    // Bytes of cubins kept in memory in front of the disk cache.
    uint64_t hot_cache_bytes = 256ull << 20;
    // How long a compile failure is answered from memory.
    std::chrono::seconds negative_ttl{30};
    // Entries the negative cache keeps at most (expired ones go first).
    size_t negative_entries = 4096;
    // The longest one compile may run before its worker is killed.
    std::chrono::milliseconds compile_timeout{std::chrono::minutes(5)};
    // How often a waiting caller checks whether it has gone away.
    std::chrono::milliseconds poll_interval{20};
    // While another daemon holds a key's lease, the remote tier is polled
    // this often at first, doubling up to remote_poll_max: a cubin that
    // lands within milliseconds is picked up at once, a long compile costs
    // a few round trips a second.
    std::chrono::milliseconds remote_poll_min{5};
    std::chrono::milliseconds remote_poll_max{200};
    // Called after each compile a worker ran (not for answers from the
    // remote tier): "ok", "failed" (NVRTC rejected the program) or "error",
    // and its wall time, queueing included. For metrics; must be cheap.
    std::function<void(std::string_view result, std::chrono::duration<double> wall)> on_compile;
  };

  struct Stats {
    uint64_t requests = 0;
    uint64_t memory_hits = 0;
    uint64_t disk_hits = 0;
    uint64_t compiles = 0;          // compiles started (at most one per flight)
    uint64_t compile_failures = 0;  // NVRTC rejected the program
    uint64_t compile_errors = 0;    // worker crash, timeout, queue full, cancelled
    uint64_t joined = 0;            // requests that waited on another's compile
    uint64_t negative_hits = 0;
    uint64_t cached_only_misses = 0;
    uint64_t prefetches = 0;        // PREFETCH requests that started a compile
    uint64_t abandoned = 0;         // requests that gave up waiting
    uint64_t store_failures = 0;    // compiled but not stored on disk
    uint64_t in_flight = 0;         // compiles running or queued now
    uint64_t remote_hits = 0;       // requests answered by the remote tier (flights and CACHED_ONLY)
    uint64_t remote_waits = 0;      // flights that waited on another daemon's lease
    uint64_t remote_takeovers = 0;  // ... and then compiled it here: the lease lapsed or was released without a cubin
    uint64_t remote_failures_shared = 0;  // flights answered with another daemon's compile failure
    HotCache::Stats hot;
  };

  // `remote` (may be null: no shared tier) must outlive the service.
  KernelService(std::shared_ptr<const manifest::Resolver> resolver, cache::Cache* cache, compiler::WorkerPool* pool,
                Options options, cache::RemoteTier* remote = nullptr);
  // Waits for compiles still running (their results are stored).
  ~KernelService();
  KernelService(const KernelService&) = delete;
  KernelService& operator=(const KernelService&) = delete;

  // Errors: the resolver's (NOT_FOUND, INVALID_ARGUMENT); NOT_FOUND on a
  // CACHED_ONLY miss; FAILED_PRECONDITION with the NVRTC log; the pool's
  // RESOURCE_EXHAUSTED / UNAVAILABLE / DEADLINE_EXCEEDED; DEADLINE_EXCEEDED
  // or CANCELLED when the caller gave up first.
  absl::StatusOr<KernelAnswer> Get(const manifest::KernelRequest& request, Mode mode, const CallContext& context);

  // Resolves only (key, canonical params), without looking anything up.
  absl::StatusOr<manifest::ResolvedKernel> Resolve(const manifest::KernelRequest& request) const;

  void SwapResolver(std::shared_ptr<const manifest::Resolver> resolver);

  // Drops entries from the hot cache (after an operator evicted them from
  // disk): an evicted key is not served from memory either.
  void Forget(const std::vector<std::string>& keys);
  std::shared_ptr<const manifest::Resolver> resolver() const;

  Stats stats() const;

 private:
  struct Flight;
  struct Failure {
    absl::Status status;
    std::chrono::steady_clock::time_point expires;
  };

  // Joins `flight` (counting a COMPILE request as a waiter) unless its
  // last waiter has cancelled it. Requires flights_mu_.
  static bool Join(Flight& flight, Mode mode);
  absl::StatusOr<KernelAnswer> Wait(std::shared_ptr<Flight> flight, KernelAnswer answer, const CallContext& context,
                                    bool joined);
  void RunFlight(std::shared_ptr<Flight> flight, manifest::ResolvedKernel resolved, compiler::Priority priority);
  std::shared_ptr<const cache::Entry> Store(const manifest::ResolvedKernel& resolved, compiler::CompileResult result);
  // Publishes an entry on disk and returns it as read back (or, when the
  // disk refuses it, from memory).
  std::shared_ptr<const cache::Entry> Keep(cache::EntryMeta meta, std::string cubin);
  // What the fleet says before this daemon compiles (remote tier only):
  // `result` set when the remote tier answered (a cubin or a shared
  // failure) or the flight was cancelled while waiting; `leased` when this
  // daemon holds the key's lease and compiles.
  struct FleetOutcome {
    std::optional<absl::StatusOr<std::shared_ptr<const cache::Entry>>> result;
    bool leased = false;
  };
  FleetOutcome AskFleet(Flight& flight, const manifest::ResolvedKernel& resolved);
  // A CACHED_ONLY miss: the remote tier's verified entry, stored locally.
  // Gives up at the caller's `deadline` if that comes first.
  std::shared_ptr<const cache::Entry> FetchRemote(const std::string& key,
                                                  std::chrono::steady_clock::time_point deadline);
  std::optional<absl::Status> RecentFailure(const std::string& key);
  void RememberFailure(const std::string& key, const absl::Status& status);

  const Options options_;
  cache::Cache* const cache_;
  compiler::WorkerPool* const pool_;
  cache::RemoteTier* const remote_;
  HotCache hot_;

  mutable std::mutex resolver_mu_;
  std::shared_ptr<const manifest::Resolver> resolver_;

  // Lock order: flights_mu_ before a Flight's own mutex; never the reverse.
  std::mutex flights_mu_;
  std::unordered_map<std::string, std::shared_ptr<Flight>> flights_;
  std::map<std::string, Failure> failures_;  // under flights_mu_

  // One thread per running flight (bounded by the pool's queue); finished
  // ones are joined when the next starts, the rest by the destructor.
  struct CompileThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };
  std::mutex threads_mu_;
  std::vector<CompileThread> threads_;
  std::atomic<bool> stopping_{false};  // set by the destructor

  mutable std::mutex stats_mu_;
  // Store failures in a row (a full or read-only disk): the first is
  // logged as a warning, the rest only counted until a store succeeds.
  uint64_t store_failure_streak_ = 0;  // guarded by stats_mu_
  Stats stats_;
};

}  // namespace jitd::serving
