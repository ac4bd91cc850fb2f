#include "rpc/daemon_metrics.h"

#include <spdlog/spdlog.h>

#include <cctype>

#include "jitd/base/status.h"
#include "system/memory_trim.h"

namespace jitd::daemon {
namespace {

using metrics::Emitter;

// "ok", "not_found", "failed_precondition": the gRPC code as a label value.
std::string OutcomeName(absl::StatusCode code) {
  if (code == absl::StatusCode::kOk) return "ok";
  std::string name = absl::StatusCodeToString(code);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

// The mounted bundles (--bundle); nothing without any.
// Which jitd runs, and the heap it holds.
void EmitProcess(Emitter& e, const std::string& version, const std::string& nvrtc_version) {
  e.Gauge("jitd_build_info", "Always 1; the labels say which jitd and NVRTC are running.", 1,
          {{"version", version}, {"nvrtc", nvrtc_version}});
  e.Gauge("jitd_heap_allocated_bytes",
          "Heap bytes the daemon holds now (allocated, not freed): unlike resident memory, not counting what "
          "the allocator keeps for reuse.",
          static_cast<double>(AllocatedHeapBytes()));
}

void EmitBundles(Emitter& e, const std::vector<const cache::Bundle*>& bundles, const serving::KernelService::Stats& k) {
  if (bundles.empty()) return;
  for (const cache::Bundle* bundle : bundles) {
    e.Gauge("jitd_bundle_entries", "Entries of a sealed seed bundle mounted read-only (--bundle).",
            static_cast<double>(bundle->size()), {{"bundle", bundle->path().string()}});
  }
  e.Counter("jitd_bundle_hits_total", "Requests answered from a mounted bundle.", static_cast<double>(k.bundle_hits));
  e.Counter("jitd_bundle_corrupt_total",
            "Bundle entries that no longer verified when read (the file changed): never served.",
            static_cast<double>(k.bundle_corrupt));
}

// Each kernel tree: what it serves, whether it serves, refused reloads.
void EmitTrees(Emitter& e, const serving::KernelTrees& trees) {
  for (const serving::KernelTrees::State& t : trees.states()) {
    const std::vector<std::pair<std::string, std::string>> labels{{"tree", t.source.name},
                                                                  {"namespace", t.kernel_namespace}};
    e.Gauge("jitd_kernel_tree_kernels", "Kernels a kernel tree serves (--kernels NAME=DIR); by tree.",
            static_cast<double>(t.kernels), labels);
    e.Gauge("jitd_kernel_tree_serving", "1 while a kernel tree is served, 0 when it was refused at start.",
            t.serving ? 1 : 0, {{"tree", t.source.name}});
    e.Gauge("jitd_kernel_tree_locked_instantiations", "Instantiations a tree's --lock file lists (0: not locked).",
            static_cast<double>(t.locked), {{"tree", t.source.name}});
    e.Counter("jitd_kernel_tree_refused_reloads_total",
              "Reloads (SIGHUP) of a tree refused (guard findings, unreadable sources, a bad lock); by tree.",
              static_cast<double>(t.refused_reloads), {{"tree", t.source.name}});
  }
}

// Requests for archs outside the fleet set; nothing without a fleet set.
void EmitArchMisses(Emitter& e, const serving::KernelService::Stats& k) {
  for (const auto& [arch, misses] : k.arch_misses) {
    e.Counter("jitd_arch_misses_total", "Requests for an arch outside the fleet set (--fleet-archs), by arch.",
              static_cast<double>(misses), {{"arch", arch}});
  }
}

// The last recompile of the hot set (--rewarm-count).
void EmitRewarm(Emitter& e, const serving::Rewarmer::Progress& r) {
  e.Gauge("jitd_rewarm_running", "1 while the hot set is being compiled again after a toolkit change.",
          r.state == "running" ? 1 : 0);
  e.Gauge("jitd_rewarm_hot_set", "Instantiations the last rewarm considered (the most used of the cache).",
          static_cast<double>(r.hot_set));
  e.Gauge("jitd_rewarm_ready", "Of the hot set, those in the cache under their current key.",
          static_cast<double>(r.ready));
  e.Gauge("jitd_rewarm_compiled", "Of the hot set, those the last rewarm compiled.", static_cast<double>(r.compiled));
  e.Gauge("jitd_rewarm_failed", "Of the hot set, those that did not compile or no longer resolve.",
          static_cast<double>(r.failed));
  e.Counter("jitd_rewarm_runs_total", "Rewarm runs since the daemon started.", static_cast<double>(r.runs));
}

}  // namespace

void DaemonMetrics::EmitBundlesFleetAndRewarm(Emitter& e, const Sources& s, const serving::KernelService::Stats& k) {
  EmitBundles(e, s.service->bundles(), k);
  EmitArchMisses(e, k);
  if (s.rewarmer != nullptr) EmitRewarm(e, s.rewarmer->progress());
  if (s.trees != nullptr) EmitTrees(e, *s.trees);
}

absl::StatusOr<std::unique_ptr<DaemonMetrics>> DaemonMetrics::Create() {
  std::unique_ptr<DaemonMetrics> m(new DaemonMetrics());
  JITD_ASSIGN_OR_RETURN(
      m->requests_,
      m->registry_.AddCounter(
          "jitd_requests_total",
          "GetKernel calls answered, by outcome (ok or the gRPC status code) and source (memory, disk, remote, "
          "compiled; none for errors and PREFETCH).",
          {"outcome", "source"}));
  // 50 us .. ~52 s, doubling: a memory hit (~0.2 ms) to a long compile.
  JITD_ASSIGN_OR_RETURN(m->request_seconds_,
                        m->registry_.AddHistogram("jitd_request_duration_seconds",
                                                  "Time the daemon took to answer a GetKernel call, by source.",
                                                  {"source"}, metrics::ExponentialBuckets(0.00005, 2, 21)));
  JITD_ASSIGN_OR_RETURN(
      m->compiles_,
      m->registry_.AddCounter(
          "jitd_compiles_total",
          "Compiles run by the workers: ok, failed (NVRTC rejected the program) or error (crash, timeout, cancelled).",
          {"result"}));
  // 10 ms .. ~328 s, doubling: a trivial kernel to the compile timeout.
  JITD_ASSIGN_OR_RETURN(m->compile_seconds_, m->registry_.AddHistogram("jitd_compile_duration_seconds",
                                                                       "Wall time of each compile, queueing included.",
                                                                       {}, metrics::ExponentialBuckets(0.01, 2, 16)));
  JITD_ASSIGN_OR_RETURN(
      m->local_,
      m->registry_.AddCounter(
          "jitd_local_requests_total",
          "Requests of the local path (a same-host client without gRPC), by outcome: ok, not_found (a miss, which the "
          "client asks again over gRPC) or another gRPC code. Its answers also count in jitd_requests_total.",
          {"outcome"}));
  return m;
}

void DaemonMetrics::ObserveRequest(absl::StatusCode code, serving::Origin origin, std::chrono::duration<double> took) {
  const size_t c = std::min(static_cast<size_t>(code), kCodes - 1);
  const size_t o = std::min(static_cast<size_t>(origin), kOrigins - 1);
  auto& slot = request_series_[c * kOrigins + o];
  metrics::Counter* counter = slot.load(std::memory_order_acquire);
  if (counter == nullptr) {
    counter = &requests_->WithLabels({OutcomeName(code), serving::OriginName(origin)});
    slot.store(counter, std::memory_order_release);
  }
  counter->Increment();
  auto& latency_slot = latency_series_[o];
  metrics::Histogram* latency = latency_slot.load(std::memory_order_acquire);
  if (latency == nullptr) {
    latency = &request_seconds_->WithLabels({serving::OriginName(origin)});
    latency_slot.store(latency, std::memory_order_release);
  }
  latency->Observe(took.count());
}

void DaemonMetrics::ObserveLocal(absl::StatusCode code, serving::Origin origin, std::chrono::duration<double> took) {
  const size_t c = std::min(static_cast<size_t>(code), kCodes - 1);
  metrics::Counter* counter = local_series_[c].load(std::memory_order_acquire);
  if (counter == nullptr) {
    counter = &local_->WithLabels({OutcomeName(code)});
    local_series_[c].store(counter, std::memory_order_release);
  }
  counter->Increment();
  if (code != absl::StatusCode::kNotFound) ObserveRequest(code, origin, took);
}

void DaemonMetrics::ObserveCompile(std::string_view result, std::chrono::duration<double> took) {
  compiles_->WithLabels({result}).Increment();
  compile_seconds_->WithLabels({}).Observe(took.count());
}

void DaemonMetrics::Collect(Sources s) {
  registry_.AddCollector([s](Emitter& e) {
    EmitProcess(e, s.version, s.nvrtc_version);

    if (absl::StatusOr<cache::CacheStats> c = s.cache->Stats(); c.ok()) {
      e.Gauge("jitd_cache_bytes", "Bytes of blob files in the disk cache.", static_cast<double>(c->bytes));
      e.Gauge("jitd_cache_entries", "Entries in the disk cache.", static_cast<double>(c->entries));
      e.Gauge("jitd_cache_max_bytes", "The disk cache's byte budget (0 = unbounded).",
              static_cast<double>(c->max_bytes));
      e.Gauge("jitd_cache_pinned_bytes", "Bytes of entries eviction never removes.",
              static_cast<double>(c->pinned_bytes));
      e.Counter("jitd_cache_hits_total", "Disk cache lookups that hit (over the directory's life, all processes).",
                static_cast<double>(c->hits));
      e.Counter("jitd_cache_misses_total", "Disk cache lookups that missed (over the directory's life).",
                static_cast<double>(c->misses));
      e.Counter("jitd_cache_evictions_total", "Entries removed by eviction (budget and explicit).",
                static_cast<double>(c->evictions));
      e.Counter("jitd_cache_corruptions_total",
                "Entries found corrupt (checksum, truncation, missing blob) and dropped, never served.",
                static_cast<double>(c->corrupt));
      e.Counter("jitd_cache_publish_failures_total", "Cubins that could not be written to disk (full disk, I/O).",
                static_cast<double>(c->publish_failures));
    }

    const serving::KernelService::Stats k = s.service->stats();
    e.Gauge("jitd_hot_cache_bytes", "Bytes of cubins held in memory in front of the disk cache.",
            static_cast<double>(k.hot.bytes));
    e.Gauge("jitd_hot_cache_entries", "Entries held in memory.", static_cast<double>(k.hot.entries));
    e.Counter("jitd_hot_cache_evictions_total", "Entries the memory tier dropped to stay within its budget.",
              static_cast<double>(k.hot.evictions));
    e.Gauge("jitd_compiles_in_flight", "Compiles running or waiting for a worker now.",
            static_cast<double>(k.in_flight));
    e.Counter("jitd_single_flight_joined_total", "Requests that waited on a compile another request started.",
              static_cast<double>(k.joined));
    e.Counter("jitd_negative_hits_total", "Requests answered with a remembered compile failure.",
              static_cast<double>(k.negative_hits));
    e.Counter("jitd_abandoned_total", "Requests whose caller gave up (deadline, cancel) while waiting.",
              static_cast<double>(k.abandoned));

    EmitBundlesFleetAndRewarm(e, s, k);

    const compiler::WorkerPool::Statistics p = s.pool->Stats();
    e.Gauge("jitd_compile_queue_depth", "Compiles waiting for a worker now.", static_cast<double>(p.queue_depth));
    e.Gauge("jitd_workers", "Compile worker processes running.", static_cast<double>(p.workers));
    e.Gauge("jitd_workers_busy", "Compile workers compiling now.", static_cast<double>(p.busy_workers));
    e.Counter("jitd_worker_crashes_total", "Workers that died while compiling.", static_cast<double>(p.crashes));

    if (s.remote == nullptr) return;
    const cache::RemoteTier::Stats r = s.remote->stats();
    const char* help = "Calls to the shared remote tier, by operation and result.";
    auto remote = [&](const char* op, const char* result, uint64_t n) {
      e.Counter("jitd_remote_requests_total", help, static_cast<double>(n), {{"op", op}, {"result", result}});
    };
    remote("get", "hit", r.hits);
    remote("get", "miss", r.misses);
    remote("get", "corrupt", r.corrupt);
    remote("get", "oversized", r.oversized);
    remote("get", "not_reread", r.not_reread);
    remote("get", "failure_shared", r.failures_seen);
    remote("get", "unsigned_module", r.unsigned_modules);
    remote("put", "ok", r.stores);
    remote("lease", "acquired", r.leases_acquired);
    remote("lease", "busy", r.leases_busy);
    remote("lease", "lost", r.leases_lost);
    e.Counter("jitd_remote_errors_total", "Remote calls that failed (down, timeout, full, refused).",
              static_cast<double>(r.errors));
    e.Counter("jitd_remote_skipped_total", "Remote calls not made because the circuit breaker was open.",
              static_cast<double>(r.skipped));
    e.Gauge("jitd_remote_circuit_open", "1 while the remote tier is skipped after repeated failures.",
            r.circuit_open ? 1 : 0);
    e.Counter("jitd_remote_outages_total", "Times the circuit breaker opened.", static_cast<double>(r.episodes));
    e.Counter("jitd_remote_waits_total", "Flights that waited for another daemon's compile (its lease).",
              static_cast<double>(k.remote_waits));
    e.Counter("jitd_remote_takeovers_total",
              "Flights that waited on another daemon's lease and then compiled here: the lease lapsed or was released "
              "without a cubin.",
              static_cast<double>(k.remote_takeovers));
  });
}

}  // namespace jitd::daemon
