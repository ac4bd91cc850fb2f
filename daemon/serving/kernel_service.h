// KernelService: the daemon's request path, independent of gRPC.
//
//   resolve (manifest) -> TierStack: memory -> disk (-> remote, CACHED_ONLY)
//     -> FlightTable: join the key's flight, or lead a new one:
//          [remote tier: ask the fleet, take the key's lease or wait on it]
//          -> WorkerPool::CompileAsync -> store on disk -> publish in memory
//          -> answer every waiter -> write back to the fleet, release lease
//
// The parts, each with its own manual: tier.h (what each tier is and the
// two rules that keep them in agreement: a hit anywhere is recorded below,
// a removal anywhere is forgotten above), flight_table.h (single flight,
// cancellation, the negative memo), executor.h (the fixed threads that run
// a flight's steps; no thread is parked per flight), worker_pool.h.
//
// * Single flight: identical concurrent requests (same content key) share
//   one flight; every caller waits on it and gets its result.
// * A caller that gives up (deadline, cancellation) stops waiting at once;
//   when the last waiter gives up and nobody else wants it (no PREFETCH),
//   the compile is cancelled.
// * Compile failures (NVRTC rejected the program) are remembered for
//   Options::negative_ttl; each request still gets the error and the log.
// * A compiled cubin is returned even when it cannot be stored on disk
//   (full disk); the failure is counted and logged.
// * Fleet-wide single flight (with a remote tier): a flight first asks the
//   remote tier; on a miss it takes the key's lease there and compiles,
//   writing the cubin back after its local callers have their answer, and
//   only then releasing the lease; when another daemon holds the lease, the
//   flight polls (a delayed task, no thread held) until that daemon's cubin
//   appears or its lease lapses, and this daemon takes over. A compile
//   failure is shared the same way. The remote tier failing never fails a
//   request: the flight compiles locally.
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
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/worker_pool.h"
#include "jitd/bundle_storage.h"
#include "jitd/cache.h"
#include "manifest/manifest.h"
#include "remote/remote.h"
#include "remote/remote_storage.h"
#include "serving/admission.h"
#include "serving/executor.h"
#include "serving/flight_table.h"
#include "serving/resolver_slot.h"
#include "serving/tier.h"

namespace jitd::serving {

// What the caller brings besides the request: when it stops waiting and how
// urgent it is.
struct CallContext {
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // Polled while waiting; true once the caller has gone away.
  std::function<bool()> cancelled;
  compiler::Priority priority = compiler::Priority::kLive;
  // Who asks ("uid:1000", a TCP client's address, kRewarmPeer), for the
  // per-peer quota on new compiles (Options::max_compiles_per_peer). Every
  // caller is counted: an empty peer is one identity of its own
  // (kUnnamedPeer), shared by every caller that names none, never a way
  // around the quota.
  std::string peer;
};

// The identity of the daemon's own warm-ups after a toolkit change
// (rewarm.h): counted like one client, so that it can hold at most one
// client's share of the compiles, and the rest of the queue stays for
// clients (it also runs at warm priority, behind every live request).
inline constexpr char kRewarmPeer[] = "daemon:rewarm";

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
    // Threads that run flights' steps (fleet polls, stores, write-backs).
    // A store costs a few ms and a write-back up to the remote timeout, so
    // a few threads keep many flights moving.
    size_t executor_threads = 4;
    // While another daemon holds a key's lease, the remote tier is polled
    // this often at first, doubling up to remote_poll_max: a cubin that
    // lands within milliseconds is picked up at once, a long compile costs
    // a few round trips a second.
    std::chrono::milliseconds remote_poll_min{5};
    std::chrono::milliseconds remote_poll_max{200};
    // The bounds of admission.h, which says what each one holds back:
    // compiles that may wait at once (--max-queue; PREFETCH-started flights
    // may take at most half of it), new compiles one peer may have queued
    // or running (Admission::PeerFlightShare), calls one peer may have in
    // flight (--max-calls-per-peer, counted by the translators above the
    // service through admission()). A request over a bound is answered
    // RESOURCE_EXHAUSTED; one that joins a flight already running is never
    // refused. 0 = no bound.
    size_t max_queue = 0;
    size_t max_compiles_per_peer = 0;
    size_t max_calls_per_peer = 0;
    // Called after each compile a worker ran (not for answers from the
    // remote tier): "ok", "failed" (NVRTC rejected the program) or "error",
    // and its wall time, queueing included. For metrics; must be cheap.
    std::function<void(std::string_view result, std::chrono::duration<double> wall)> on_compile;
    // The fleet's archs (--fleet-archs, sm_ only; empty = no fleet set): a
    // request for any other arch is served and counted (arch_misses).
    std::vector<std::string> fleet_archs;
    // Given a request's kernel name and the NOT_FOUND its resolution gave,
    // the answer to send instead (KernelTrees::ExplainNotFound: the tree it
    // names was refused, and why). Null: NOT_FOUND as it is.
    std::function<absl::Status(const std::string& kernel, absl::Status not_found)> explain_not_found;
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
    uint64_t prefetches = 0;      // PREFETCH requests that started a compile
    uint64_t abandoned = 0;       // requests that gave up waiting
    uint64_t store_failures = 0;  // compiled but not stored on disk
    uint64_t in_flight = 0;       // compiles running or queued now
    uint64_t remote_hits = 0;     // requests answered by the remote tier (flights and CACHED_ONLY)
    uint64_t bundle_hits = 0;     // requests answered by a mounted bundle
    uint64_t bundle_corrupt = 0;  // bundle entries that no longer verified (served from elsewhere)
    // Requests for an arch outside the fleet set, by arch (empty without one).
    std::map<std::string, uint64_t> arch_misses;
    uint64_t remote_waits = 0;      // flights that waited on another daemon's lease
    uint64_t remote_takeovers = 0;  // ... and then compiled it here: the lease lapsed or was released without a cubin
    uint64_t remote_failures_shared = 0;  // flights answered with another daemon's compile failure
    uint64_t prefetches_refused = 0;      // PREFETCHes answered RESOURCE_EXHAUSTED (max_queue)
    uint64_t peer_compiles_refused = 0;   // new compiles refused by max_compiles_per_peer
    HotCache::Stats hot;
  };

  // `remote` (may be null: no shared tier) and `bundles` (mounted
  // read-only below the disk, asked in order) must outlive the service.
  KernelService(std::shared_ptr<const manifest::Resolver> resolver, cache::Cache* cache, compiler::WorkerPool* pool,
                Options options, cache::RemoteTier* remote = nullptr, std::vector<const cache::Bundle*> bundles = {});
  // Waits for flights still running (their results are stored).
  ~KernelService();
  KernelService(const KernelService&) = delete;
  KernelService& operator=(const KernelService&) = delete;

  // Errors: the resolver's (NOT_FOUND, INVALID_ARGUMENT); NOT_FOUND on a
  // CACHED_ONLY miss; FAILED_PRECONDITION with the NVRTC log; the pool's
  // RESOURCE_EXHAUSTED / UNAVAILABLE / DEADLINE_EXCEEDED; DEADLINE_EXCEEDED
  // or CANCELLED when the caller gave up first.
  absl::StatusOr<KernelAnswer> Get(const manifest::KernelRequest& request, Mode mode, const CallContext& context);

  // The answer from memory, disk or a bundle, for the local path: nullopt on a miss
  // and on the resolver's errors, which count nothing (the caller asks
  // Get() next, which counts them); a hit counts as a request and a hit,
  // and records its use in every tier below, exactly as Get()'s would.
  // Never waits: no remote tier, no flight.
  std::optional<KernelAnswer> Find(const manifest::KernelRequest& request);

  // Get(COMPILE) without a waiting thread: `done` gets the same answer, at
  // once on this thread when it is known now (a hit, a remembered failure,
  // a refused request), else on a thread of the service when the flight
  // finishes; the caller's deadline and `cancelled` are not polled. Returns
  // the flight to Withdraw() from, or null when `done` has run. `done`
  // must be cheap and must not call back into the service.
  std::shared_ptr<Flight> Submit(const manifest::KernelRequest& request, const CallContext& context,
                                 std::function<void(absl::StatusOr<KernelAnswer>)> done);
  // The caller of Submit() gives up on `flight`: when nobody else wants it,
  // its compile is cancelled. `done` still runs (with CANCELLED, say).
  void Withdraw(Flight& flight);

  // Pins `key`'s entry on disk: the byte budget never evicts it (an
  // explicit Evict with include_pinned may). For what a warm-up put there:
  // ad-hoc entries (-D churn) must not push warmed ones out.
  absl::Status Pin(const std::string& key);

  // Resolves only (key, canonical params), without looking anything up.
  absl::StatusOr<manifest::ResolvedKernel> Resolve(const manifest::KernelRequest& request) const;

  // The resolver's one writer. `next` gets the resolver served now and
  // returns the one to serve instead (the same one: nothing changes; an
  // error: nothing changes, the error is returned), while no other update
  // runs: a toolkit change (the same trees under a new toolchain) and a
  // reload (new trees, locks included, under the toolchain now) each build
  // on what the other swapped in, never on what was there before it, so
  // neither can undo the other. Requests resolve with the current resolver
  // meanwhile. `next` must not update the resolver itself.
  using ResolverUpdate = ResolverSlot::Update;
  absl::StatusOr<std::shared_ptr<const manifest::Resolver>> UpdateResolver(const ResolverUpdate& next);
  // UpdateResolver with a `next` that ignores what is served now.
  void SwapResolver(std::shared_ptr<const manifest::Resolver> resolver);

  // Drops entries from memory. The disk's own removals (eviction, repair)
  // reach memory by themselves (tier.h, rule 2); this is for removals the
  // disk cannot see (another process evicting the same directory).
  void Forget(const std::vector<std::string>& keys);
  std::shared_ptr<const manifest::Resolver> resolver() const;

  Stats stats() const;
  // The bundles mounted below the disk, in the order asked (none: empty).
  std::vector<const cache::Bundle*> bundles() const;
  // What a fleet request's fatbin holds: each fleet arch, then the PTX
  // (compute_N) of the lowest; empty without a fleet set.
  const std::vector<std::string>& fleet_targets() const { return fleet_targets_; }
  // Options::max_compiles_per_peer (0 = no bound).
  size_t max_compiles_per_peer() const { return admission_.max_flights_per_peer(); }
  // Who may take what (admission.h): the translators ask it for each call.
  Admission& admission() { return admission_; }

 private:
  struct FlightWork;  // a led flight's state between its steps

  // Counters, each updated with one relaxed atomic add (no lock on the
  // request path); stats() reads a snapshot.
  struct Counters {
    std::atomic<uint64_t> requests{0}, memory_hits{0}, disk_hits{0}, compiles{0}, compile_failures{0},
        compile_errors{0}, joined{0}, negative_hits{0}, cached_only_misses{0}, prefetches{0}, abandoned{0},
        in_flight{0}, remote_hits{0}, remote_waits{0}, remote_takeovers{0}, remote_failures_shared{0};
  };

  // What a request is before it waits: answered now, or a flight to wait
  // on (joined or led) with the answer to fill from its result.
  struct Begun {
    std::optional<absl::StatusOr<KernelAnswer>> now;
    std::shared_ptr<Flight> flight;
    KernelAnswer answer;
  };
  Begun Begin(const manifest::KernelRequest& request, Mode mode, const CallContext& context);
  // Starts a led flight: the fleet first (remote tier), else the compile.
  void StartFlight(std::shared_ptr<FlightWork> work);
  // One round of asking the fleet; runs on the executor, and again after a
  // delay while another daemon holds the key's lease.
  void AskFleet(std::shared_ptr<FlightWork> work);
  // Finishes the flight with the fleet's answer when it has one (a cubin, or
  // a shared failure) and says so; false on a miss or an unavailable store.
  bool FinishFromFleet(std::shared_ptr<FlightWork>& work, cache::RemoteFetch& fetched);
  void Compile(std::shared_ptr<FlightWork> work);
  void OnCompiled(std::shared_ptr<FlightWork> work, absl::StatusOr<compiler::CompileResult> result,
                  std::chrono::steady_clock::time_point started);
  // Publishes the result in memory, answers the waiters, then (compiled
  // here, remote tier) writes back and releases the lease.
  void FinishFlight(std::shared_ptr<FlightWork> work, FlightResult result, bool compiled_here);
  absl::StatusOr<KernelAnswer> Wait(Flight& flight, KernelAnswer answer, const CallContext& context);

  const Options options_;
  compiler::WorkerPool* const pool_;
  cache::RemoteTier* const remote_;

  void CountLocalHit(Origin origin);
  // Counts `arch` in arch_misses when there is a fleet set it is not in.
  void NoteArch(const std::string& arch);

  // The tiers, fastest first; the bundles only when mounted, the remote
  // one only with a remote tier.
  MemoryTier memory_;
  cache::DiskStorage disk_;
  std::optional<cache::BundleStorage> bundled_;
  std::optional<cache::RemoteStorage> shared_;
  std::unique_ptr<TierStack> tiers_;
  size_t local_tiers_ = 2;   // memory, disk and the bundles: what CACHED_ONLY and Find() ask
  size_t remote_level_ = 2;  // the remote tier's level, when there is one
  FlightTable flights_;

  ResolverSlot resolver_;

  Counters counters_;
  const std::vector<std::string> fleet_targets_;
  mutable std::mutex arch_misses_mu_;
  std::map<std::string, uint64_t> arch_misses_;  // guarded by arch_misses_mu_
  // Flights led and not yet finished; the destructor waits for none.
  std::mutex active_mu_;
  std::condition_variable active_cv_;
  size_t active_ = 0;                  // guarded by active_mu_
  std::atomic<bool> stopping_{false};  // set by the destructor: fleet waits end
  Admission admission_;

  // Declared last, destroyed first: its threads run the steps above.
  Executor executor_;
};

}  // namespace jitd::serving
