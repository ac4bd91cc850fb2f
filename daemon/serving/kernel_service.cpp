#include "kernel_service.h"

#include <spdlog/spdlog.h>

#include "jitd/detail/text.h"

namespace jitd::serving {
namespace {

using text::Cat;
using Clock = std::chrono::steady_clock;

bool IsCompileFailure(const absl::Status& s) {
  // What the program itself caused; worth remembering. Crashes, timeouts,
  // a full queue or a cancel are not the program's fault: retry next time.
  return absl::IsFailedPrecondition(s) || absl::IsInvalidArgument(s);
}

std::string Short(const std::string& key) { return key.substr(0, 12); }

}  // namespace

const char* OriginName(Origin origin) {
  switch (origin) {
    case Origin::kMemory:
      return "memory";
    case Origin::kDisk:
      return "disk";
    case Origin::kRemote:
      return "remote";
    case Origin::kCompiled:
      return "compiled";
    case Origin::kNone:
      return "none";
  }
  return "none";
}

struct KernelService::Flight {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  absl::StatusOr<std::shared_ptr<const cache::Entry>> result = absl::UnknownError("not finished");
  int waiters = 0;
  bool wanted_without_waiters = false;  // a PREFETCH asked for it
  std::shared_ptr<compiler::CancelFlag> cancel = std::make_shared<compiler::CancelFlag>();
  Origin origin = Origin::kCompiled;  // kRemote when the fleet answered
};

KernelService::KernelService(std::shared_ptr<const manifest::Resolver> resolver, cache::Cache* cache,
                             compiler::WorkerPool* pool, Options options, cache::RemoteTier* remote)
    : options_(options),
      cache_(cache),
      pool_(pool),
      remote_(remote),
      hot_(options.hot_cache_bytes),
      resolver_(std::move(resolver)) {}

KernelService::~KernelService() {
  stopping_ = true;  // flights waiting on another daemon's lease stop waiting
  std::vector<CompileThread> threads;
  {
    std::lock_guard lock(threads_mu_);
    threads.swap(threads_);
  }
  for (auto& t : threads) t.thread.join();
}

void KernelService::SwapResolver(std::shared_ptr<const manifest::Resolver> resolver) {
  std::lock_guard lock(resolver_mu_);
  resolver_ = std::move(resolver);
}

void KernelService::Forget(const std::vector<std::string>& keys) {
  for (const auto& key : keys) hot_.Erase(key);
}

std::shared_ptr<const manifest::Resolver> KernelService::resolver() const {
  std::lock_guard lock(resolver_mu_);
  return resolver_;
}

absl::StatusOr<manifest::ResolvedKernel> KernelService::Resolve(const manifest::KernelRequest& request) const {
  return resolver()->Resolve(request);
}

KernelService::Stats KernelService::stats() const {
  Stats s;
  {
    std::lock_guard lock(stats_mu_);
    s = stats_;
  }
  s.hot = hot_.stats();
  return s;
}

std::optional<absl::Status> KernelService::RecentFailure(const std::string& key) {
  auto it = failures_.find(key);
  if (it == failures_.end()) return std::nullopt;
  if (Clock::now() >= it->second.expires) {
    failures_.erase(it);
    return std::nullopt;
  }
  return it->second.status;
}

void KernelService::RememberFailure(const std::string& key, const absl::Status& status) {
  auto now = Clock::now();
  if (failures_.size() >= options_.negative_entries) {
    for (auto it = failures_.begin(); it != failures_.end();)
      it = it->second.expires <= now ? failures_.erase(it) : std::next(it);
    if (failures_.size() >= options_.negative_entries) failures_.erase(failures_.begin());
  }
  failures_[key] = {status, now + options_.negative_ttl};
}

absl::StatusOr<KernelAnswer> KernelService::Get(const manifest::KernelRequest& request, Mode mode,
                                                const CallContext& context) {
  {
    std::lock_guard lock(stats_mu_);
    ++stats_.requests;
  }
  auto resolved = Resolve(request);
  if (!resolved.ok()) return resolved.status();
  KernelAnswer answer;
  answer.key = resolved->key;
  answer.kernel = resolved->kernel;
  answer.params = resolved->params;
  answer.arch = resolved->arch;

  if (auto hot = hot_.Get(answer.key)) {
    std::lock_guard lock(stats_mu_);
    ++stats_.memory_hits;
    answer.origin = Origin::kMemory;
    answer.entry = std::move(hot);
    return answer;
  }
  auto disk = cache_->Lookup(answer.key);
  if (disk.ok()) {
    auto entry = std::make_shared<const cache::Entry>(std::move(*disk));
    hot_.Put(answer.key, entry);
    std::lock_guard lock(stats_mu_);
    ++stats_.disk_hits;
    answer.origin = Origin::kDisk;
    answer.entry = std::move(entry);
    return answer;
  }
  if (!absl::IsNotFound(disk.status())) {
    // The index could not be read: log it, and compile as if it missed.
    spdlog::warn("disk cache lookup of {} failed: {}", Short(answer.key), disk.status().ToString());
  }

  if (mode == Mode::kCachedOnly && remote_ != nullptr) {
    // Not a compile: another daemon's cubin is as cached as our own.
    if (auto entry = FetchRemote(answer.key, context.deadline)) {
      hot_.Put(answer.key, entry);
      answer.origin = Origin::kRemote;
      answer.entry = std::move(entry);
      return answer;
    }
  }

  std::shared_ptr<Flight> flight;
  bool joined = false;
  {
    std::lock_guard lock(flights_mu_);
    if (auto it = flights_.find(answer.key); it != flights_.end() && Join(*it->second, mode)) {
      flight = it->second;
      joined = true;
    } else {
      // No flight, or one its last waiter cancelled (it leaves flights_
      // once the pool has answered): a new flight, which replaces it.
      // A flight ends by filling the hot cache (or the failure memory) and
      // only then leaving flights_, both under this lock: look again.
      if (auto hot = hot_.Get(answer.key)) {
        std::lock_guard slock(stats_mu_);
        ++stats_.memory_hits;
        answer.origin = Origin::kMemory;
        answer.entry = std::move(hot);
        return answer;
      }
      if (auto failure = RecentFailure(answer.key)) {
        std::lock_guard slock(stats_mu_);
        ++stats_.negative_hits;
        return absl::Status(failure->code(), Cat("(compile failure remembered for up to ",
                                                 options_.negative_ttl.count(), " s) ", failure->message()));
      }
      if (mode == Mode::kCachedOnly) {
        std::lock_guard slock(stats_mu_);
        ++stats_.cached_only_misses;
        return absl::NotFoundError(Cat("kernel ", answer.kernel,
                                       answer.params.empty() ? "" : Cat(" (", answer.params, ")"), " for ", answer.arch,
                                       " is not in the cache (key ", answer.key,
                                       "); CACHED_ONLY never compiles: warm the cache first (jitd warm, jitctl warm)"));
      }
      flight = std::make_shared<Flight>();
      flights_[answer.key] = flight;
      std::lock_guard slock(stats_mu_);
      // With a remote tier, a flight may end without compiling: RunFlight
      // counts the compiles it runs.
      if (remote_ == nullptr) ++stats_.compiles;
      ++stats_.in_flight;
      if (mode == Mode::kPrefetch) ++stats_.prefetches;
    }
  }
  if (joined && mode == Mode::kCachedOnly) {
    std::lock_guard slock(stats_mu_);
    ++stats_.cached_only_misses;
    return absl::NotFoundError(Cat("kernel ", answer.kernel, " for ", answer.arch,
                                   " is being compiled, not cached yet (key ", answer.key,
                                   "); CACHED_ONLY never compiles or waits"));
  }
  if (mode == Mode::kPrefetch) {
    std::lock_guard lock(flight->mu);
    flight->wanted_without_waiters = true;
  }
  if (!joined) {
    // Wait for this request's caller before starting, so the flight has a
    // waiter from the first moment (or is wanted by PREFETCH).
    if (mode != Mode::kPrefetch) {
      std::lock_guard lock(flight->mu);
      ++flight->waiters;
    }
    auto finished = std::make_shared<std::atomic<bool>>(false);
    std::lock_guard lock(threads_mu_);
    for (auto it = threads_.begin(); it != threads_.end();) {
      if (it->finished->load()) {
        it->thread.join();
        it = threads_.erase(it);
      } else {
        ++it;
      }
    }
    threads_.push_back({std::thread([this, flight, r = std::move(*resolved), p = context.priority, finished]() mutable {
                          RunFlight(flight, std::move(r), p);
                          finished->store(true);
                        }),
                        finished});
  } else {
    std::lock_guard slock(stats_mu_);
    ++stats_.joined;  // its waiter was counted by Join()
  }
  if (mode == Mode::kPrefetch) {
    answer.origin = Origin::kNone;
    return answer;
  }
  return Wait(std::move(flight), std::move(answer), context, joined);
}

bool KernelService::Join(Flight& flight, Mode mode) {
  // Under flights_mu_ and the flight's lock together: the last waiter of a
  // flight cancels it under the flight's lock, so a request either joins
  // before that (and keeps the compile wanted) or sees it cancelled and
  // starts its own. Joining a cancelled flight would hand a caller that
  // never gave up a CANCELLED answer (found by the soak test).
  std::lock_guard lock(flight.mu);
  if (flight.cancel->cancelled()) return false;
  if (mode == Mode::kCompile) ++flight.waiters;  // CACHED_ONLY does not wait; PREFETCH is not a waiter
  if (mode == Mode::kPrefetch) flight.wanted_without_waiters = true;
  return true;
}

absl::StatusOr<KernelAnswer> KernelService::Wait(std::shared_ptr<Flight> flight, KernelAnswer answer,
                                                 const CallContext& context, bool joined) {
  std::unique_lock lock(flight->mu);
  while (!flight->done) {
    bool gone = context.cancelled && context.cancelled();
    bool late = Clock::now() >= context.deadline;
    if (gone || late) {
      --flight->waiters;
      const bool still_wanted = flight->waiters > 0 || flight->wanted_without_waiters;
      if (!still_wanted) flight->cancel->Cancel();
      lock.unlock();
      {
        std::lock_guard slock(stats_mu_);
        ++stats_.abandoned;
      }
      if (gone) return absl::CancelledError(Cat("the caller cancelled while ", answer.kernel, " was compiling"));
      return absl::DeadlineExceededError(
          Cat("deadline passed while ", answer.kernel, " for ", answer.arch, " was compiling (key ", Short(answer.key),
              "); ", still_wanted ? "the compile goes on for other callers" : "the compile was cancelled"));
    }
    auto until = std::min(context.deadline, Clock::now() + options_.poll_interval);
    flight->cv.wait_until(lock, until);
  }
  --flight->waiters;
  if (!flight->result.ok()) return flight->result.status();
  (void)joined;  // a follower's answer is as fresh as the leader's
  answer.origin = flight->origin;
  answer.entry = *flight->result;
  return answer;
}

std::shared_ptr<const cache::Entry> KernelService::Store(const manifest::ResolvedKernel& resolved,
                                                         compiler::CompileResult result) {
  cache::EntryMeta meta;
  meta.key = resolved.key;
  meta.kernel = resolved.kernel;
  meta.params = resolved.params;
  meta.arch = resolved.arch;
  for (const auto& o : resolved.job.options) {
    if (!cache::IsKeyNeutralOption(o)) meta.options.push_back(o);  // no machine paths in the blob
  }
  meta.nvrtc_version = resolver()->toolchain().nvrtc_version;
  for (auto& [expr, lowered] : result.lowered_names) meta.symbols.push_back({expr, lowered});
  meta.log = result.log;
  meta.compile_ms = result.compile_ms;
  return Keep(std::move(meta), std::move(result.cubin));
}

std::shared_ptr<const cache::Entry> KernelService::Keep(cache::EntryMeta meta, std::string cubin) {
  absl::Status stored = cache_->Publish(meta, cubin);
  if (stored.ok()) {
    // Read back what is on disk (verified, with its path for PATH delivery);
    // not counted as a hit: nobody asked for it twice.
    auto entry = cache_->Lookup(meta.key, cache::LookupCounting::kUncounted);
    if (entry.ok()) {
      uint64_t streak = 0;
      {
        std::lock_guard lock(stats_mu_);
        std::swap(streak, store_failure_streak_);
      }
      if (streak > 0) spdlog::info("storing compiled kernels works again, after {} that could not be stored", streak);
      return std::make_shared<const cache::Entry>(std::move(*entry));
    }
    stored = entry.status();
  }
  uint64_t streak = 0;
  {
    std::lock_guard lock(stats_mu_);
    ++stats_.store_failures;
    streak = ++store_failure_streak_;
  }
  // Once per episode: a full disk fails every compile until room is made.
  if (streak == 1) {
    spdlog::warn(
        "compiled {} ({}) but could not store it: {}; serving it from memory. Until a store succeeds, further "
        "failures are only counted (Stats: store_failures)",
        meta.kernel, Short(meta.key), stored.ToString());
  } else {
    spdlog::debug("compiled {} ({}) but could not store it: {}", meta.kernel, Short(meta.key), stored.ToString());
  }
  auto entry = std::make_shared<cache::Entry>();
  entry->meta = std::move(meta);
  entry->cubin = std::move(cubin);
  entry->checksum = cache::Checksum128(entry->cubin);
  return entry;
}

void KernelService::RunFlight(std::shared_ptr<Flight> flight, manifest::ResolvedKernel resolved,
                              compiler::Priority priority) {
  resolved.job.timeout = std::min(resolved.job.timeout, options_.compile_timeout);
  FleetOutcome fleet;
  if (remote_ != nullptr) fleet = AskFleet(*flight, resolved);
  const bool compiled_here = !fleet.result.has_value();
  absl::StatusOr<std::shared_ptr<const cache::Entry>> result = absl::UnknownError("unset");
  if (!compiled_here) {
    result = std::move(*fleet.result);
    if (result.ok()) flight->origin = Origin::kRemote;
  } else {
    if (remote_ != nullptr) {
      std::lock_guard lock(stats_mu_);
      ++stats_.compiles;
    }
    auto start = Clock::now();
    auto compiled = pool_->Compile(resolved.job, priority, flight->cancel);
    double wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (options_.on_compile) {
      const char* outcome = compiled.ok() ? "ok" : IsCompileFailure(compiled.status()) ? "failed" : "error";
      options_.on_compile(outcome, std::chrono::duration<double>(Clock::now() - start));
    }
    if (compiled.ok()) {
      double nvrtc_ms = compiled->compile_ms;
      result = Store(resolved, std::move(*compiled));
      spdlog::info("compile {} {} {} key={} nvrtc={:.0f}ms wall={:.0f}ms ok", resolved.kernel, resolved.params,
                   resolved.arch, Short(resolved.key), nvrtc_ms, wall_ms);
    } else {
      result = compiled.status();
      spdlog::info("compile {} {} {} key={} wall={:.0f}ms failed: {}", resolved.kernel, resolved.params, resolved.arch,
                   Short(resolved.key), wall_ms, std::string(compiled.status().message()).substr(0, 300));
    }
  }
  // What the write-back needs, kept before the result moves to the flight.
  const std::shared_ptr<const cache::Entry> written = result.ok() ? *result : nullptr;
  const absl::Status outcome = result.status();
  {
    std::lock_guard lock(flights_mu_);
    if (result.ok()) {
      hot_.Put(resolved.key, *result);
    } else if (IsCompileFailure(result.status())) {
      RememberFailure(resolved.key, result.status());
    }
    // Only this flight's own entry: a cancelled flight may have been
    // replaced by a newer one for the same key.
    if (auto it = flights_.find(resolved.key); it != flights_.end() && it->second == flight) flights_.erase(it);
  }
  {
    std::lock_guard lock(stats_mu_);
    --stats_.in_flight;
    // Only compiles run here: a failure shared by another daemon or a wait
    // that was cancelled is not a compile of this daemon's.
    if (compiled_here && !result.ok()) {
      (IsCompileFailure(result.status()) ? stats_.compile_failures : stats_.compile_errors)++;
    }
  }
  {
    std::lock_guard lock(flight->mu);
    flight->result = std::move(result);
    flight->done = true;
  }
  flight->cv.notify_all();
  // The local callers have their answer; then the write-back, and only
  // then the lease goes, so a daemon waiting on it finds the cubin. A
  // store that is down or slow costs this thread its timeouts (until the
  // circuit breaker opens), never a caller.
  if (remote_ != nullptr && compiled_here) {
    if (written != nullptr) {
      remote_->Store(written->meta, written->cubin);
    } else if (IsCompileFailure(outcome)) {
      remote_->StoreFailure(resolved.key, std::string(outcome.message()), options_.negative_ttl);
    }
  }
  if (fleet.leased) remote_->ReleaseLease(resolved.key);
}

std::shared_ptr<const cache::Entry> KernelService::FetchRemote(const std::string& key, Clock::time_point deadline) {
  cache::RemoteFetch fetched = remote_->Fetch(key, deadline);
  if (fetched.kind != cache::RemoteFetch::Kind::kHit) return nullptr;
  {
    std::lock_guard lock(stats_mu_);
    ++stats_.remote_hits;
  }
  return Keep(std::move(fetched.meta), std::move(fetched.cubin));
}

KernelService::FleetOutcome KernelService::AskFleet(Flight& flight, const manifest::ResolvedKernel& resolved) {
  // A holder that keeps renewing but never finishes (a wedged daemon) is
  // waited for as long as a compile may run, then this daemon compiles.
  const auto give_up = Clock::now() + options_.compile_timeout;
  auto backoff = options_.remote_poll_min;
  bool waited = false;
  while (true) {
    cache::RemoteFetch fetched = remote_->Fetch(resolved.key, Clock::time_point::max(), /*counted=*/!waited);
    switch (fetched.kind) {
      case cache::RemoteFetch::Kind::kHit: {
        std::lock_guard lock(stats_mu_);
        ++stats_.remote_hits;
      }
        if (waited) {
          spdlog::info("remote {} {} {} key={}: compiled by another daemon", resolved.kernel, resolved.params,
                       resolved.arch, Short(resolved.key));
        }
        return {Keep(std::move(fetched.meta), std::move(fetched.cubin)), false};
      case cache::RemoteFetch::Kind::kFailed: {
        std::lock_guard lock(stats_mu_);
        ++stats_.remote_failures_shared;
      }
        return {absl::FailedPreconditionError(Cat("(another daemon's compile failed; the failure is shared by the "
                                                  "fleet for up to ",
                                                  options_.negative_ttl.count(), " s) ", fetched.failure)),
                false};
      case cache::RemoteFetch::Kind::kUnavailable:
        return {};
      case cache::RemoteFetch::Kind::kMiss:
        break;
    }
    cache::LeaseResult lease = remote_->AcquireLease(resolved.key, /*counted=*/!waited);
    if (lease == cache::LeaseResult::kAcquired) {
      if (waited) {
        std::lock_guard lock(stats_mu_);
        ++stats_.remote_takeovers;
        // The holder died (its lease lapsed), or finished without a cubin
        // in the shared tier (its compile failed otherwise than NVRTC, or
        // the write-back was refused) and released it.
        spdlog::warn(
            "remote {} key={}: the daemon that held its lease left no cubin in the shared tier; compiling it "
            "here",
            resolved.kernel, Short(resolved.key));
      }
      return {std::nullopt, true};
    }
    if (lease == cache::LeaseResult::kUnavailable) return {};
    if (!waited) {
      waited = true;
      std::lock_guard lock(stats_mu_);
      ++stats_.remote_waits;
    }
    if (flight.cancel->cancelled()) {
      return {absl::CancelledError(Cat("every caller gave up while another daemon compiled ", resolved.kernel)), false};
    }
    if (stopping_) return {absl::CancelledError("the daemon is shutting down"), false};
    if (Clock::now() >= give_up) {
      spdlog::warn("remote {} key={}: another daemon has held its lease for {} s without a result; compiling it here",
                   resolved.kernel, Short(resolved.key),
                   std::chrono::duration_cast<std::chrono::seconds>(options_.compile_timeout).count());
      return {};
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, options_.remote_poll_max);
  }
}

}  // namespace jitd::serving
