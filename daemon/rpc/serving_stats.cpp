#include "rpc/serving_stats.h"

namespace jitd::daemon {

namespace {

// The fleet set, the mounted bundles and the last rewarm.
void AddFleetAndRewarm(const ServingStatsSources& sources, const serving::KernelService::Stats& s,
                       v1::StatsResponse* response) {
  for (const std::string& target : sources.service->fleet_targets()) response->add_fleet_targets(target);
  for (const auto& [arch, misses] : s.arch_misses) (*response->mutable_arch_misses())[arch] = misses;
  if (sources.rewarmer != nullptr) {
    const serving::Rewarmer::Progress r = sources.rewarmer->progress();
    v1::RewarmProgress* out = response->mutable_rewarm();
    out->set_state(r.state);
    out->set_trigger(r.trigger);
    out->set_runs(r.runs);
    out->set_hot_set(r.hot_set);
    out->set_ready(r.ready);
    out->set_compiled(r.compiled);
    out->set_failed(r.failed);
    out->set_skipped(r.skipped);
    out->set_unpinned(r.unpinned);
    out->set_migrated(r.migrated);
    out->set_started_unix_ms(r.started_unix_ms);
    out->set_finished_unix_ms(r.finished_unix_ms);
    const serving::Rewarmer::Generations g = sources.rewarmer->generations();
    out->set_generations(g.generations);
    out->set_current_entries(g.current_entries);
    out->set_current_bytes(g.current_bytes);
    out->set_older_entries(g.older_entries);
    out->set_older_bytes(g.older_bytes);
  }
  for (const cache::Bundle* bundle : sources.service->bundles()) {
    v1::MountedBundle* mounted = response->add_bundles();
    mounted->set_path(bundle->path().string());
    mounted->set_entries(bundle->size());
    mounted->set_bytes(bundle->file_bytes());
    mounted->set_seal(bundle->seal() == cache::BundleSeal::kSigned ? "hmac-sha256" : "sha256");
    mounted->set_seal_hex(bundle->seal_hex());
  }
}

// Every configured tree, served or refused.
void AddTrees(const serving::KernelTrees& trees, v1::StatsResponse* response) {
  for (const serving::KernelTrees::State& state : trees.states()) {
    v1::KernelTreeInfo* info = response->add_trees();
    info->set_name(state.source.name);
    info->set_dir(state.source.dir.string());
    info->set_serving(state.serving);
    info->set_error(state.error);
    info->set_kernels(static_cast<uint32_t>(state.kernels));
    info->set_fingerprint(state.fingerprint);
    info->set_kernel_namespace(state.kernel_namespace);
    info->set_lock(state.lock);
    info->set_locked_instantiations(state.locked);
    info->set_refused_reloads(state.refused_reloads);
  }
}

}  // namespace

void AddServingStats(const ServingStatsSources& sources, v1::StatsResponse* response) {
  const serving::KernelService::Stats s = sources.service->stats();
  response->set_hot_entries(s.hot.entries);
  response->set_hot_bytes(s.hot.bytes);
  response->set_hot_max_bytes(s.hot.max_bytes);
  response->set_hot_evictions(s.hot.evictions);
  response->set_requests(s.requests);
  response->set_memory_hits(s.memory_hits);
  response->set_disk_hits(s.disk_hits);
  response->set_compiles(s.compiles);
  response->set_compile_failures(s.compile_failures);
  response->set_compile_errors(s.compile_errors);
  response->set_joined(s.joined);
  response->set_negative_hits(s.negative_hits);
  response->set_cached_only_misses(s.cached_only_misses);
  response->set_prefetches(s.prefetches);
  response->set_abandoned(s.abandoned);
  response->set_compiles_in_flight(s.in_flight);
  response->set_store_failures(s.store_failures);

  const compiler::WorkerPool::Statistics p = sources.pool->Stats();
  response->set_workers(static_cast<uint32_t>(p.workers));
  response->set_busy_workers(static_cast<uint32_t>(p.busy_workers));
  response->set_queue_depth(static_cast<uint32_t>(p.queue_depth));
  response->set_max_queue(sources.max_queue);
  response->set_worker_crashes(p.crashes);
  response->set_worker_restarts(p.restarts);

  const std::shared_ptr<const manifest::Resolver> resolver = sources.service->resolver();
  response->set_nvrtc_version(resolver->toolchain().nvrtc_version);
  response->set_kernels_fingerprint(resolver->tree().fingerprint());
  response->set_kernels(static_cast<uint32_t>(resolver->tree().manifest().kernels.size()));
  response->set_kernels_dir(resolver->tree().source_dir().string());
  if (sources.trees != nullptr) AddTrees(*sources.trees, response);

  response->set_prefetches_refused(s.prefetches_refused);
  response->set_peer_compiles_refused(s.peer_compiles_refused);
  response->set_remote_waits(s.remote_waits);
  response->set_remote_takeovers(s.remote_takeovers);
  response->set_remote_failures_shared(s.remote_failures_shared);
  response->set_remote_hits(s.remote_hits);
  AddFleetAndRewarm(sources, s, response);
  response->set_bundle_hits(s.bundle_hits);
  response->set_bundle_corrupt(s.bundle_corrupt);
  if (sources.remote != nullptr) {
    const cache::RemoteTier::Stats r = sources.remote->stats();
    response->set_remote(sources.remote->Describe());
    response->set_remote_misses(r.misses);
    response->set_remote_corrupt(r.corrupt);
    response->set_remote_oversized(r.oversized);
    response->set_remote_not_reread(r.not_reread);
    response->set_remote_unsigned_modules(r.unsigned_modules);
    response->set_remote_stores(r.stores);
    response->set_remote_errors(r.errors);
    response->set_remote_skipped(r.skipped);
    response->set_remote_circuit_open(r.circuit_open);
    response->set_remote_outages(r.episodes);
  }
}

}  // namespace jitd::daemon
