#include "serving/kernel_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "guard/namespace_guard.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "jitd/keys/content_key.h"

namespace jitd::serving {
namespace {

using text::Cat;
using Clock = std::chrono::steady_clock;

// Tier levels of the stack, fastest first: memory, disk, then the bundles
// (when mounted) and the remote tier (when there is one), whose levels
// the service keeps (local_tiers_, remote_level_).
constexpr size_t kMemoryLevel = 0;
constexpr size_t kDiskLevel = 1;

bool IsCompileFailure(const absl::Status& s) {
  // What the program itself caused; worth remembering. Crashes, timeouts,
  // a full queue or a cancel are not the program's fault: retry next time.
  return absl::IsFailedPrecondition(s) || absl::IsInvalidArgument(s);
}

std::string Short(const std::string& key) { return key.substr(0, 12); }

// The namespace rule of the served tree named `tree` (trees keep their names
// across reloads; the default rule should one ever be missing).
std::string TreeNamespace(const manifest::Resolver& resolver, const std::string& tree) {
  for (const manifest::ServedTree& t : resolver.trees()) {
    if (t.name == tree) return t.tree->manifest().kernel_namespace;
  }
  return manifest::Manifest{}.kernel_namespace;
}

// How logs and messages name a resolved instantiation (text::Instantiation).
std::string Instantiation(const manifest::ResolvedKernel& r) {
  return text::Instantiation(r.kernel, r.params, r.arch, r.request_options);
}

void Bump(std::atomic<uint64_t>& counter) { counter.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

// A led flight between its steps. Only the step that runs now touches it.
struct KernelService::FlightWork {
  std::shared_ptr<Flight> flight;
  manifest::ResolvedKernel resolved;
  compiler::Priority priority = compiler::Priority::kLive;
  // Fleet: a holder that keeps renewing but never finishes (a wedged
  // daemon) is waited for as long as a compile may run, then this daemon
  // compiles.
  Clock::time_point give_up;
  std::chrono::milliseconds backoff{0};
  bool waited = false;           // another daemon held the lease at least once
  bool leased = false;           // this daemon holds the key's lease
  Admission::Ticket admitted;    // its place as a new flight (its peer's share, PREFETCH's)
  Admission::Ticket fleet_wait;  // its place in the queue while it waits on another daemon
};

KernelService::KernelService(std::shared_ptr<const manifest::Resolver> resolver, cache::Cache* cache,
                             compiler::WorkerPool* pool, Options options, cache::RemoteTier* remote,
                             std::vector<const cache::Bundle*> bundles)
    : options_(options),
      pool_(pool),
      remote_(remote),
      memory_(options.hot_cache_bytes),
      disk_(cache),
      flights_(FlightTable::Options{options.negative_ttl, options.negative_entries, options.poll_interval}),
      resolver_(std::move(resolver)),
      fleet_targets_(manifest::FleetTargets(options.fleet_archs)),
      admission_(Admission::Options{.max_calls_per_peer = options.max_calls_per_peer,
                                    .max_flights_per_peer = options.max_compiles_per_peer,
                                    .max_queue = options.max_queue},
                 [pool] { return pool == nullptr ? size_t{0} : pool->Stats().queue_depth; }),
      executor_(options.executor_threads) {
  std::vector<cache::Storage*> tiers = {&memory_, &disk_};
  if (!bundles.empty()) {
    bundled_.emplace(std::move(bundles));
    tiers.push_back(&*bundled_);
  }
  local_tiers_ = tiers.size();
  remote_level_ = tiers.size();
  if (remote_ != nullptr) {
    shared_.emplace(remote_);
    tiers.push_back(&*shared_);
  }
  tiers_ = std::make_unique<TierStack>(std::move(tiers));
}

void KernelService::NoteArch(const std::string& arch) {
  if (fleet_targets_.empty() || std::find(fleet_targets_.begin(), fleet_targets_.end(), arch) != fleet_targets_.end()) {
    return;
  }
  std::lock_guard lock(arch_misses_mu_);
  ++arch_misses_[arch];
}

void KernelService::CountLocalHit(Origin origin) {
  // A bundle's hits are counted by its level (BundleStorage::stats).
  if (origin == Origin::kMemory) Bump(counters_.memory_hits);
  if (origin == Origin::kDisk) Bump(counters_.disk_hits);
}

KernelService::~KernelService() {
  stopping_ = true;  // flights waiting on another daemon's lease stop waiting
  std::unique_lock lock(active_mu_);
  active_cv_.wait(lock, [&] { return active_ == 0; });
}

absl::StatusOr<std::shared_ptr<const manifest::Resolver>> KernelService::UpdateResolver(const ResolverUpdate& next) {
  return resolver_.Apply(next);
}

void KernelService::SwapResolver(std::shared_ptr<const manifest::Resolver> resolver) {
  (void)UpdateResolver([&resolver](const std::shared_ptr<const manifest::Resolver>&) { return std::move(resolver); });
}

void KernelService::Forget(const std::vector<std::string>& keys) { memory_.Forget(keys); }

absl::Status KernelService::Pin(const std::string& key) { return disk_.Pin(key); }

std::shared_ptr<const manifest::Resolver> KernelService::resolver() const { return resolver_.current(); }

absl::StatusOr<manifest::ResolvedKernel> KernelService::Resolve(const manifest::KernelRequest& request) const {
  absl::StatusOr<manifest::ResolvedKernel> resolved = resolver()->Resolve(request);
  if (resolved.ok() || !absl::IsNotFound(resolved.status()) || !options_.explain_not_found) return resolved;
  return options_.explain_not_found(request.kernel, resolved.status());
}

KernelService::Stats KernelService::stats() const {
  const auto get = [](const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  const Counters& c = counters_;
  Stats s;
  s.requests = get(c.requests);
  s.memory_hits = get(c.memory_hits);
  s.disk_hits = get(c.disk_hits);
  s.compiles = get(c.compiles);
  s.compile_failures = get(c.compile_failures);
  s.compile_errors = get(c.compile_errors);
  s.joined = get(c.joined);
  s.negative_hits = get(c.negative_hits);
  s.cached_only_misses = get(c.cached_only_misses);
  s.prefetches = get(c.prefetches);
  s.abandoned = get(c.abandoned);
  s.store_failures = disk_.stats().fill_failures;
  s.in_flight = get(c.in_flight);
  s.remote_hits = get(c.remote_hits);
  s.bundle_hits = bundled_.has_value() ? bundled_->stats().hits : 0;
  s.bundle_corrupt = bundled_.has_value() ? bundled_->stats().corrupt : 0;
  {
    std::lock_guard lock(arch_misses_mu_);
    s.arch_misses = arch_misses_;
  }
  s.remote_waits = get(c.remote_waits);
  s.remote_takeovers = get(c.remote_takeovers);
  s.remote_failures_shared = get(c.remote_failures_shared);
  const Admission::Stats admission = admission_.stats();
  s.prefetches_refused = admission.prefetches_refused;
  s.peer_compiles_refused = admission.peer_flights_refused;
  s.hot = memory_.hot_stats();
  return s;
}

std::vector<const cache::Bundle*> KernelService::bundles() const {
  return bundled_.has_value() ? bundled_->bundles() : std::vector<const cache::Bundle*>{};
}

std::optional<KernelAnswer> KernelService::Find(const manifest::KernelRequest& request) {
  absl::StatusOr<manifest::ResolvedKernel> resolved = Resolve(request);
  if (!resolved.ok()) return std::nullopt;
  std::optional<TierStack::Hit> hit = tiers_->Lookup(resolved->key, kMemoryLevel, local_tiers_);
  if (!hit.has_value()) return std::nullopt;
  Bump(counters_.requests);
  NoteArch(resolved->arch);
  CountLocalHit(hit->origin);
  KernelAnswer answer;
  answer.key = resolved->key;
  answer.kernel = resolved->kernel;
  answer.params = resolved->params;
  answer.arch = resolved->arch;
  answer.origin = hit->origin;
  answer.entry = std::move(hit->entry);
  return answer;
}

KernelService::Begun KernelService::Begin(const manifest::KernelRequest& request, Mode mode,
                                          const CallContext& context) {
  Bump(counters_.requests);
  Begun begun;
  auto resolved = Resolve(request);
  if (!resolved.ok()) {
    begun.now = resolved.status();
    return begun;
  }
  NoteArch(resolved->arch);
  KernelAnswer& answer = begun.answer;
  answer.key = resolved->key;
  answer.kernel = resolved->kernel;
  answer.params = resolved->params;
  answer.arch = resolved->arch;

  // Memory, disk, bundles: a hit records a use below and fills above.
  if (std::optional<TierStack::Hit> hit = tiers_->Lookup(answer.key, kMemoryLevel, local_tiers_)) {
    CountLocalHit(hit->origin);
    answer.origin = hit->origin;
    answer.entry = std::move(hit->entry);
    begun.now = answer;
    return begun;
  }
  if (mode == Mode::kCachedOnly && remote_ != nullptr) {
    // Not a compile: another daemon's cubin is as cached as our own.
    if (std::optional<TierStack::Hit> hit =
            tiers_->Lookup(answer.key, remote_level_, remote_level_ + 1, context.deadline)) {
      Bump(counters_.remote_hits);
      answer.origin = Origin::kRemote;
      answer.entry = std::move(hit->entry);
      begun.now = answer;
      return begun;
    }
  }

  // A flight that finished since the lookup above published in memory
  // first (under the table's lock): look there once more before leading.
  std::shared_ptr<const cache::Entry> present;
  FlightTable::JoinResult joined = flights_.Join(answer.key, mode, [&] {
    present = memory_.Lookup(answer.key, Clock::time_point::max());
    return present != nullptr;
  });
  switch (joined.kind) {
    case FlightTable::Joined::kPresent:
      disk_.RecordUse(answer.key);
      Bump(counters_.memory_hits);
      answer.origin = Origin::kMemory;
      answer.entry = std::move(present);
      begun.now = answer;
      return begun;
    case FlightTable::Joined::kRemembered:
      Bump(counters_.negative_hits);
      begun.now = joined.failure;
      return begun;
    case FlightTable::Joined::kAbsent:
      Bump(counters_.cached_only_misses);
      begun.now = absl::NotFoundError(
          Cat(text::Instantiation(answer.kernel, answer.params, answer.arch), " is not in the cache (key ", answer.key,
              "); CACHED_ONLY never compiles: warm the cache first (jitd warm, jitctl warm)"));
      return begun;
    case FlightTable::Joined::kFollower:
      if (mode == Mode::kCachedOnly) {
        Bump(counters_.cached_only_misses);
        begun.now = absl::NotFoundError(Cat(text::Instantiation(answer.kernel, answer.params, answer.arch),
                                            " is being compiled, not cached yet (key ", answer.key,
                                            "); CACHED_ONLY never compiles or waits"));
        return begun;
      }
      Bump(counters_.joined);  // its waiter was counted by Join()
      break;
    case FlightTable::Joined::kLeader: {
      Admission::Ticket ticket;
      const absl::Status admitted = admission_.AdmitFlight(context.peer, mode == Mode::kPrefetch, &ticket);
      if (!admitted.ok()) {
        // Nothing started: the flight ends at once (a request that joined
        // it meanwhile gets the same answer), unremembered.
        flights_.Finish(joined.flight, {admitted, Origin::kCompiled}, /*remember=*/false, {});
        begun.now = admitted;
        return begun;
      }
      Bump(counters_.in_flight);
      if (mode == Mode::kPrefetch) Bump(counters_.prefetches);
      auto work = std::make_shared<FlightWork>();
      work->flight = joined.flight;
      work->admitted = std::move(ticket);
      work->resolved = *std::move(resolved);
      work->priority = context.priority;
      StartFlight(std::move(work));
      break;
    }
  }
  begun.flight = std::move(joined.flight);
  return begun;
}

absl::StatusOr<KernelAnswer> KernelService::Get(const manifest::KernelRequest& request, Mode mode,
                                                const CallContext& context) {
  Begun begun = Begin(request, mode, context);
  if (begun.now) return *std::move(begun.now);
  if (mode == Mode::kPrefetch) {
    begun.answer.origin = Origin::kNone;
    return std::move(begun.answer);
  }
  return Wait(*begun.flight, std::move(begun.answer), context);
}

std::shared_ptr<Flight> KernelService::Submit(const manifest::KernelRequest& request, const CallContext& context,
                                              std::function<void(absl::StatusOr<KernelAnswer>)> done) {
  Begun begun = Begin(request, Mode::kCompile, context);
  if (begun.now) {
    done(*std::move(begun.now));
    return nullptr;
  }
  FlightTable::OnDone(*begun.flight,
                      [answer = std::move(begun.answer), done = std::move(done)](const FlightResult& result) mutable {
                        if (!result.entry.ok()) {
                          done(result.entry.status());
                          return;
                        }
                        answer.origin = result.origin;
                        answer.entry = *result.entry;
                        done(std::move(answer));
                      });
  return std::move(begun.flight);
}

void KernelService::Withdraw(Flight& flight) {
  Bump(counters_.abandoned);
  FlightTable::Withdraw(flight);
}

absl::StatusOr<KernelAnswer> KernelService::Wait(Flight& flight, KernelAnswer answer, const CallContext& context) {
  FlightTable::WaitResult waited = flights_.Wait(flight, context.deadline, context.cancelled);
  if (!waited.result) {
    Bump(counters_.abandoned);
    if (waited.caller_gone)
      return absl::CancelledError(Cat("the caller cancelled while ",
                                      text::Instantiation(answer.kernel, answer.params, answer.arch),
                                      " was compiling"));
    return absl::DeadlineExceededError(
        Cat("deadline passed while ", text::Instantiation(answer.kernel, answer.params, answer.arch),
            " was compiling (key ", Short(answer.key), "); ",
            waited.still_wanted ? "the compile goes on for other callers" : "the compile was cancelled"));
  }
  JITD_ASSIGN_OR_RETURN(answer.entry, waited.result->entry);
  answer.origin = waited.result->origin;
  return answer;
}

void KernelService::StartFlight(std::shared_ptr<FlightWork> work) {
  {
    std::lock_guard lock(active_mu_);
    ++active_;
  }
  work->resolved.job.timeout = std::min(work->resolved.job.timeout, options_.compile_timeout);
  if (remote_ == nullptr) {
    Compile(std::move(work));
    return;
  }
  work->give_up = Clock::now() + options_.compile_timeout;
  work->backoff = options_.remote_poll_min;
  // The fleet's answer can take a round trip or a remote timeout: off the
  // caller's thread (a PREFETCH answers at once).
  executor_.Post([this, work = std::move(work)]() mutable { AskFleet(std::move(work)); });
}

bool KernelService::FinishFromFleet(std::shared_ptr<FlightWork>& work, cache::RemoteFetch& fetched) {
  const manifest::ResolvedKernel& r = work->resolved;
  switch (fetched.kind) {
    case cache::RemoteFetch::Kind::kHit: {
      Bump(counters_.remote_hits);
      if (work->waited) {
        spdlog::info("remote {} key={}: compiled by another daemon", Instantiation(r), Short(r.key));
      }
      auto entry = std::make_shared<cache::Entry>();
      entry->meta = std::move(fetched.meta);
      entry->cubin = std::move(fetched.cubin);
      entry->checksum = cache::Checksum128(entry->cubin);
      // Into the disk now; into memory when the flight finishes.
      std::shared_ptr<const cache::Entry> kept = tiers_->Fill(std::move(entry), kDiskLevel, local_tiers_);
      FinishFlight(std::move(work), {std::move(kept), Origin::kRemote}, /*compiled_here=*/false);
      return true;
    }
    case cache::RemoteFetch::Kind::kFailed:
      Bump(counters_.remote_failures_shared);
      FinishFlight(std::move(work),
                   {absl::FailedPreconditionError(Cat("(another daemon's compile failed; the failure is shared by the "
                                                      "fleet for up to ",
                                                      options_.negative_ttl.count(), " s) ", fetched.failure)),
                    Origin::kRemote},
                   /*compiled_here=*/false);
      return true;
    case cache::RemoteFetch::Kind::kUnavailable:
    case cache::RemoteFetch::Kind::kMiss:
      return false;
  }
  return false;
}

void KernelService::AskFleet(std::shared_ptr<FlightWork> work) {
  const manifest::ResolvedKernel& r = work->resolved;
  cache::RemoteFetch fetched = remote_->Fetch(r.key, Clock::time_point::max(), /*counted=*/!work->waited);
  if (FinishFromFleet(work, fetched)) return;
  if (fetched.kind == cache::RemoteFetch::Kind::kUnavailable) {
    Compile(std::move(work));
    return;
  }
  cache::LeaseResult lease = remote_->AcquireLease(r.key, /*counted=*/!work->waited);
  if (lease == cache::LeaseResult::kAcquired) {
    // The holder writes its result, then releases the lease: between this
    // daemon's miss and its lease it may have done both. Read once more, or
    // the fleet compiles the key twice.
    cache::RemoteFetch again = remote_->Fetch(r.key, Clock::time_point::max(), /*counted=*/false);
    if (again.kind == cache::RemoteFetch::Kind::kHit || again.kind == cache::RemoteFetch::Kind::kFailed) {
      remote_->ReleaseLease(r.key);
      FinishFromFleet(work, again);
      return;
    }
    if (work->waited) {
      Bump(counters_.remote_takeovers);
      // The holder died (its lease lapsed), or finished without a cubin in
      // the shared tier (its compile failed otherwise than NVRTC, or the
      // write-back was refused) and released it.
      spdlog::warn(
          "remote {} key={}: the daemon that held its lease left no cubin in the shared tier; compiling it here",
          Instantiation(r), Short(r.key));
    }
    work->leased = true;
    Compile(std::move(work));
    return;
  }
  if (lease == cache::LeaseResult::kUnavailable) {
    Compile(std::move(work));
    return;
  }
  if (!work->waited) {
    // A wait on the fleet is a queued compile too: it counts against
    // max_queue like one waiting for a worker.
    if (absl::Status admitted = admission_.AdmitFleetWait(r.kernel, &work->fleet_wait); !admitted.ok()) {
      FinishFlight(std::move(work), {admitted, Origin::kCompiled}, /*compiled_here=*/false);
      return;
    }
    work->waited = true;
    Bump(counters_.remote_waits);
  }
  if (work->flight->cancelled()) {
    FinishFlight(
        std::move(work),
        {absl::CancelledError(Cat("every caller gave up while another daemon compiled ", r.kernel)), Origin::kCompiled},
        /*compiled_here=*/false);
    return;
  }
  if (stopping_) {
    FinishFlight(std::move(work), {absl::CancelledError("the daemon is shutting down"), Origin::kCompiled},
                 /*compiled_here=*/false);
    return;
  }
  if (Clock::now() >= work->give_up) {
    spdlog::warn("remote {} key={}: another daemon has held its lease for {} s without a result; compiling it here",
                 Instantiation(r), Short(r.key),
                 std::chrono::duration_cast<std::chrono::seconds>(options_.compile_timeout).count());
    Compile(std::move(work));
    return;
  }
  const auto delay = work->backoff;
  work->backoff = std::min(work->backoff * 2, options_.remote_poll_max);
  executor_.PostAfter(delay, [this, work = std::move(work)]() mutable { AskFleet(std::move(work)); });
}

void KernelService::Compile(std::shared_ptr<FlightWork> work) {
  work->fleet_wait.Release();  // now queued for a worker, counted by the pool
  Bump(counters_.compiles);
  const auto started = Clock::now();
  compiler::CompileJob job = work->resolved.job;
  const compiler::Priority priority = work->priority;
  std::shared_ptr<compiler::CancelFlag> cancel = work->flight->cancel();
  // The pool's completion thread hands the result to the executor at once:
  // storing it (a disk write) must not hold up other compiles' answers.
  pool_->CompileAsync(std::move(job), priority, std::move(cancel),
                      [this, work = std::move(work), started](absl::StatusOr<compiler::CompileResult> result) mutable {
                        auto shared = std::make_shared<absl::StatusOr<compiler::CompileResult>>(std::move(result));
                        executor_.Post([this, work = std::move(work), shared, started]() mutable {
                          OnCompiled(std::move(work), std::move(*shared), started);
                        });
                      });
}

void KernelService::OnCompiled(std::shared_ptr<FlightWork> work, absl::StatusOr<compiler::CompileResult> compiled,
                               Clock::time_point started) {
  const manifest::ResolvedKernel& r = work->resolved;
  // What NVRTC made of the sources must be in the tree's namespace, whatever
  // the sources seemed to say (the module check, guard/namespace_guard.h): a
  // module that is not is a compile failure, answered and remembered as
  // one, never stored.
  if (compiled.ok()) {
    absl::Status outside = guard::CheckModuleNamespace(compiled->cubin, TreeNamespace(*resolver(), r.tree), r.kernel);
    if (!outside.ok()) compiled = std::move(outside);
  }
  const auto wall = Clock::now() - started;
  const double wall_ms = std::chrono::duration<double, std::milli>(wall).count();
  if (options_.on_compile) {
    const char* outcome = compiled.ok() ? "ok" : IsCompileFailure(compiled.status()) ? "failed" : "error";
    options_.on_compile(outcome, std::chrono::duration<double>(wall));
  }
  if (!compiled.ok()) {
    spdlog::info("compile {} key={} wall={:.0f}ms failed: {}", Instantiation(r), Short(r.key), wall_ms,
                 std::string(compiled.status().message()).substr(0, 300));
    FinishFlight(std::move(work), {compiled.status(), Origin::kCompiled}, /*compiled_here=*/true);
    return;
  }
  auto entry = std::make_shared<cache::Entry>();
  cache::EntryMeta& meta = entry->meta;
  meta.key = r.key;
  meta.kernel = r.kernel;
  meta.params = r.params;
  meta.arch = r.arch;
  const bool module = r.job.kind == compiler::ArtifactKind::kSharedObject;
  for (const auto& o : module ? r.job.module.compile_options : r.job.options) {
    if (!keys::IsKeyNeutralOption(o)) meta.options.push_back(o);  // no machine paths in the blob
  }
  meta.request_options = r.request_options;
  meta.nvrtc_version = module ? r.compiler : resolver()->toolchain().nvrtc_version;
  for (auto& [expr, lowered] : compiled->lowered_names) meta.symbols.push_back({expr, lowered});
  meta.log = compiled->log;
  meta.compile_ms = compiled->compile_ms;
  entry->cubin = std::move(compiled->cubin);
  entry->checksum = cache::Checksum128(entry->cubin);
  spdlog::info("compile {} key={} nvrtc={:.0f}ms wall={:.0f}ms ok", Instantiation(r), Short(r.key), meta.compile_ms,
               wall_ms);
  // Into the disk now; into memory when the flight finishes.
  std::shared_ptr<const cache::Entry> kept = tiers_->Fill(std::move(entry), kDiskLevel, local_tiers_);
  FinishFlight(std::move(work), {std::move(kept), Origin::kCompiled}, /*compiled_here=*/true);
}

void KernelService::FinishFlight(std::shared_ptr<FlightWork> work, FlightResult result, bool compiled_here) {
  const manifest::ResolvedKernel& r = work->resolved;
  // What the write-back needs, kept before the result moves to the flight.
  const std::shared_ptr<const cache::Entry> written = result.entry.ok() ? *result.entry : nullptr;
  const absl::Status outcome = result.entry.status();
  const bool failed_here = compiled_here && !outcome.ok();
  // Counted before the callers wake: whoever reads the stats after its
  // answer finds this flight in them. The failure before the in-flight
  // count: a reader that sees nothing in flight sees the failure too.
  work->fleet_wait.Release();
  work->admitted.Release();
  // Only compiles run here: a failure shared by another daemon or a wait
  // that was cancelled is not a compile of this daemon's.
  if (failed_here) Bump(IsCompileFailure(outcome) ? counters_.compile_failures : counters_.compile_errors);
  counters_.in_flight.fetch_sub(1, std::memory_order_relaxed);
  flights_.Finish(work->flight, std::move(result), !outcome.ok() && IsCompileFailure(outcome), [&] {
    if (written != nullptr) tiers_->Fill(written, kMemoryLevel, kDiskLevel);
  });
  // The local callers have their answer; then the write-back, and only
  // then the lease goes, so a daemon waiting on it finds the cubin. A store
  // that is down or slow costs an executor thread its timeouts (until the
  // circuit breaker opens), never a caller.
  if (remote_ != nullptr && compiled_here) {
    if (written != nullptr) {
      tiers_->Fill(written, remote_level_, remote_level_ + 1);
    } else if (IsCompileFailure(outcome)) {
      remote_->StoreFailure(r.key, std::string(outcome.message()), options_.negative_ttl);
    }
  }
  if (work->leased) remote_->ReleaseLease(r.key);
  work.reset();
  std::lock_guard lock(active_mu_);
  if (--active_ == 0) active_cv_.notify_all();
}

}  // namespace jitd::serving
