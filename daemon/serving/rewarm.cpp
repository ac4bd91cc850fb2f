#include "serving/rewarm.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "jitd/base/kernel_params.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "serving/warm_plan.h"
#include "serving/warm_run.h"

namespace jitd::serving {
namespace {

using Clock = std::chrono::steady_clock;

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What tells one instantiation's entries (of every generation) together.
using InstantiationId = std::tuple<std::string, std::string, std::string, std::vector<std::string>>;

InstantiationId IdOf(const cache::EntryInfo& e) { return {e.kernel, e.params, e.arch, e.options}; }

// The request that asks for `e`'s instantiation; nullopt when its params
// do not read back.
std::optional<manifest::KernelRequest> RequestOf(const cache::EntryInfo& e) {
  std::optional<std::map<std::string, std::string>> params = ParseCanonicalParams(e.params);
  if (!params.has_value()) return std::nullopt;
  return manifest::KernelRequest{
      .kernel = e.kernel, .params = *std::move(params), .arch = e.arch, .options = e.options};
}

// The request for `e`'s instantiation under the trees served now, and the
// key it resolves to ("" when it does not resolve). An entry stored under a
// bare name (an unnamed tree's) may belong to a tree now served by name
// beside others, where the bare name is ambiguous: the qualified name whose
// key is the entry's is taken then.
std::pair<std::optional<manifest::KernelRequest>, std::string> CurrentRequest(const KernelService& service,
                                                                              const cache::EntryInfo& e) {
  std::optional<manifest::KernelRequest> request = RequestOf(e);
  if (!request.has_value()) return {std::nullopt, ""};
  absl::StatusOr<manifest::ResolvedKernel> resolved = service.Resolve(*request);
  if (resolved.ok() && resolved->key == e.key) return {request, resolved->key};
  if (e.kernel.find('/') == std::string::npos) {
    for (const manifest::ServedTree& tree : service.resolver()->trees()) {
      if (tree.name.empty()) continue;
      manifest::KernelRequest qualified = *request;
      qualified.kernel = manifest::QualifiedName(tree.name, e.kernel);
      absl::StatusOr<manifest::ResolvedKernel> named = service.Resolve(qualified);
      if (named.ok() && named->key == e.key) return {std::move(qualified), named->key};
    }
  }
  return {request, resolved.ok() ? resolved->key : std::string()};
}

// Every instantiation of `entries`, most used first.
std::vector<Rewarmer::Hot> Rank(const std::vector<cache::EntryInfo>& entries) {
  using Hot = Rewarmer::Hot;
  std::map<InstantiationId, Hot> by_instantiation;
  for (const cache::EntryInfo& e : entries) {
    std::optional<manifest::KernelRequest> request = RequestOf(e);
    if (!request.has_value()) continue;
    Hot& hot = by_instantiation[IdOf(e)];
    hot.request = *std::move(request);
    hot.hits += e.hits;
    hot.last_used_unix_ms = std::max(hot.last_used_unix_ms, e.last_used_unix_ms);
    if (e.pinned) hot.pinned_keys.push_back(e.key);
  }
  std::vector<Hot> ranked;
  ranked.reserve(by_instantiation.size());
  for (auto& [id, hot] : by_instantiation) ranked.push_back(std::move(hot));
  std::stable_sort(ranked.begin(), ranked.end(), [](const Hot& a, const Hot& b) {
    return std::tie(b.hits, b.last_used_unix_ms) < std::tie(a.hits, a.last_used_unix_ms);
  });
  return ranked;
}

// Counts `e` current (its instantiation resolves to its key under
// `service`'s kernels and toolkit) or older.
void CountEntry(const KernelService& service, const cache::EntryInfo& e, Rewarmer::Generations& g) {
  if (CurrentRequest(service, e).second == e.key) {
    ++g.current_entries;
    g.current_bytes += e.size_bytes;
  } else {
    ++g.older_entries;
    g.older_bytes += e.size_bytes;
  }
}

// Generations are at least two when current and older entries are both kept.
void AtLeastTwoWhenMixed(Rewarmer::Generations& g) {
  if (g.current_entries > 0 && g.older_entries > 0) g.generations = std::max<uint32_t>(g.generations, 2);
}

// Each entry of `entries` current or older, and the most entries one
// instantiation of them has.
Rewarmer::Generations CountGenerations(const KernelService& service, const std::vector<cache::EntryInfo>& entries) {
  std::map<InstantiationId, uint32_t> per_instantiation;
  Rewarmer::Generations g;
  for (const cache::EntryInfo& e : entries) {
    g.generations = std::max(g.generations, ++per_instantiation[IdOf(e)]);
    CountEntry(service, e, g);
  }
  AtLeastTwoWhenMixed(g);
  return g;
}

// The same over the whole cache, read one entry at a time: a cache of
// 100k entries costs one entry's memory, not a list of all of them.
absl::StatusOr<Rewarmer::Generations> CountGenerations(const KernelService& service, cache::Cache& cache) {
  Rewarmer::Generations g;
  JITD_RETURN_IF_ERROR(cache.ForEach({}, [&](const cache::EntryInfo& e) {
    CountEntry(service, e, g);
    return true;
  }));
  JITD_ASSIGN_OR_RETURN(const uint64_t largest, cache.LargestInstantiation());
  g.generations = static_cast<uint32_t>(std::min<uint64_t>(largest, UINT32_MAX));
  AtLeastTwoWhenMixed(g);
  return g;
}

}  // namespace

Rewarmer::Generations Rewarmer::generations() const {
  std::lock_guard lock(generations_mu_);
  const std::shared_ptr<const manifest::Resolver> resolver = service_.resolver();
  absl::StatusOr<cache::CacheStats> stats = cache_.Stats();
  if (!stats.ok()) return generations_.value;
  GenerationsMemo& memo = generations_;
  const bool same_resolver =
      !memo.resolver.owner_before(resolver) && !resolver.owner_before(memo.resolver) && !memo.resolver.expired();
  if (memo.valid && same_resolver && memo.entries == stats->entries && memo.bytes == stats->bytes &&
      memo.publishes == stats->publishes && memo.evictions == stats->evictions) {
    return memo.value;
  }
  absl::StatusOr<Generations> counted = CountGenerations(service_, cache_);
  if (!counted.ok()) return memo.value;
  memo = GenerationsMemo{.valid = true,
                         .resolver = resolver,
                         .entries = stats->entries,
                         .bytes = stats->bytes,
                         .publishes = stats->publishes,
                         .evictions = stats->evictions,
                         .value = *counted};
  return memo.value;
}

std::vector<size_t> Rewarmer::Survey(const std::vector<Hot>& ranked, std::vector<std::string>& keys) {
  // Ready already, or to compile; what no longer resolves has failed.
  std::vector<size_t> missing;
  uint32_t ready = 0, failed = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    absl::StatusOr<manifest::ResolvedKernel> resolved = service_.Resolve(ranked[i].request);
    if (!resolved.ok()) {
      ++failed;
      continue;
    }
    keys[i] = resolved->key;
    absl::StatusOr<bool> present = cache_.Contains(resolved->key);
    if ((present.ok() && *present) || Migrate(*resolved, ranked[i])) {
      ++ready;
    } else {
      missing.push_back(i);
    }
  }
  std::lock_guard lock(mu_);
  progress_.ready = ready;
  progress_.failed = failed;
  return missing;
}

bool Rewarmer::Migrate(const manifest::ResolvedKernel& resolved, const Hot& hot) {
  if (resolved.named_key.empty()) return false;
  absl::StatusOr<cache::Entry> old = cache_.Lookup(resolved.named_key, cache::LookupCounting::kUncounted);
  if (!old.ok()) return false;
  cache::EntryMeta meta = old->meta;
  meta.key = resolved.key;
  if (absl::Status copied = cache_.Publish(meta, old->cubin); !copied.ok()) {
    spdlog::warn("rewarm: cannot copy {} from its tree-named key {}: {}", resolved.kernel,
                 resolved.named_key.substr(0, 12), copied.ToString());
    return false;
  }
  const bool pinned =
      std::find(hot.pinned_keys.begin(), hot.pinned_keys.end(), resolved.named_key) != hot.pinned_keys.end();
  if (pinned) (void)cache_.Pin(resolved.key, true);
  std::lock_guard lock(mu_);
  ++progress_.migrated;
  return true;
}

uint32_t Rewarmer::UnpinOlder(const std::vector<Hot>& ranked, const std::vector<std::string>& keys) {
  // Older generations of what is ready now age out like any entry.
  uint32_t unpinned = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].empty()) continue;
    absl::StatusOr<bool> present = cache_.Contains(keys[i]);
    if (!present.ok() || !*present) continue;
    for (const std::string& key : ranked[i].pinned_keys) {
      if (key != keys[i] && cache_.Pin(key, false).ok()) ++unpinned;
    }
  }
  return unpinned;
}

Rewarmer::Rewarmer(KernelService& service, cache::Cache& cache, Options options)
    : service_(service), cache_(cache), options_(options) {
  thread_ = std::thread([this] { Loop(); });
}

Rewarmer::~Rewarmer() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Rewarmer::Trigger(std::string why) {
  if (options_.count == 0) return;
  {
    std::lock_guard lock(mu_);
    pending_ = std::move(why);
    pending_only_if_stale_ = false;
  }
  cv_.notify_all();
}

void Rewarmer::CheckAtStart() {
  if (options_.count == 0) return;
  {
    std::lock_guard lock(mu_);
    if (!pending_.empty()) return;  // a run is asked for already
    pending_ = "start";
    pending_only_if_stale_ = true;
  }
  cv_.notify_all();
}

Rewarmer::Progress Rewarmer::progress() const {
  std::lock_guard lock(mu_);
  return progress_;
}

void Rewarmer::Loop() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
    if (stopping_) return;
    const std::string why = std::move(pending_);
    const bool only_if_stale = pending_only_if_stale_;
    pending_.clear();
    lock.unlock();
    Run(why, only_if_stale);
    lock.lock();
  }
}

bool Rewarmer::AnyStale(const std::vector<cache::EntryInfo>& entries) const {
  const Generations g = CountGenerations(service_, entries);
  const uint64_t all = g.current_entries + g.older_entries;
  const std::string of =
      entries.size() >= kStartSample ? text::Cat("the ", all, " most recently used") : text::Cat(all);
  if (g.older_entries == 0) {
    spdlog::info("cache: all {} entries match the kernels and toolkit served", of);
    return false;
  }
  spdlog::warn(
      "cache: {} of {} entries match the kernels and toolkit served ({} are of an older toolkit, an older edit of "
      "their kernel or a kernel not served now); rewarming the most used",
      g.current_entries, of, g.older_entries);
  return true;
}

void Rewarmer::Run(const std::string& why, bool only_if_stale) {
  // At start the most recently used entries stand for the cache: a cache
  // of 100k entries is not resolved whole at every start.
  cache::ListFilter listed;
  if (only_if_stale) listed.limit = kStartSample;
  const auto started = Clock::now();
  // The uses the cache still holds in memory count too.
  if (absl::Status flushed = cache_.Flush(); !flushed.ok()) {
    spdlog::warn("rewarm: cannot flush the cache's recorded uses: {}", flushed.ToString());
  }
  absl::StatusOr<std::vector<cache::EntryInfo>> entries = cache_.List(listed);
  if (!entries.ok()) {
    spdlog::warn("rewarm after {}: cannot list the cache: {}", why, entries.status().ToString());
    return;
  }
  if (only_if_stale && !AnyStale(*entries)) return;
  const std::vector<Hot> ranked = Rank(*entries);
  const size_t hot_set = std::min(options_.count, ranked.size());
  {
    std::lock_guard lock(mu_);
    progress_ = Progress{.state = "running",
                         .trigger = why,
                         .runs = progress_.runs + 1,
                         .hot_set = static_cast<uint32_t>(hot_set),
                         .started_unix_ms = NowUnixMs()};
  }
  std::vector<std::string> keys(hot_set);
  const std::vector<size_t> missing = Survey(ranked, keys);
  spdlog::info("rewarm after {}: the {} most used instantiations of the cache; {} ready, {} to compile", why, hot_set,
               progress().ready, missing.size());

  WarmRunOptions run;
  run.concurrency = std::max<size_t>(1, options_.concurrency);
  run.call.priority = compiler::Priority::kWarm;
  // The daemon's own work, counted as one client: it holds at most one
  // client's share of new compiles (kernel_service.h, kRewarmPeer).
  run.call.peer = kRewarmPeer;
  run.call.deadline = started + options_.budget;
  run.call.cancelled = [this] {
    std::lock_guard lock(mu_);
    return stopping_;
  };
  // The hot set's instantiations, each for the arch it was used on: the
  // same plan every warm-up runs (warm_plan.h).
  WarmAsk ask;
  ask.specs.reserve(missing.size());
  for (size_t j : missing) ask.specs.push_back(ranked[j].request);
  absl::StatusOr<WarmPlan> plan = WarmPlan::Make(std::move(ask), *service_.resolver(), {});
  if (!plan.ok()) {
    spdlog::warn("rewarm after {}: {}", why, plan.status().ToString());
    plan = WarmPlan();
  }
  const WarmCounts counts = RunWarm(
      service_, plan->size(), [&](size_t i) { return plan->At(i); }, run,
      [&](size_t, const absl::StatusOr<KernelAnswer>&, WarmOutcome outcome, const WarmCounts&) {
        std::lock_guard lock(mu_);
        if (outcome == WarmOutcome::kFailed) {
          ++progress_.failed;
        } else {
          ++progress_.ready;
          if (outcome == WarmOutcome::kCompiled) ++progress_.compiled;
        }
        return true;
      });

  const uint32_t unpinned = UnpinOlder(ranked, keys);
  std::lock_guard lock(mu_);
  progress_.skipped = static_cast<uint32_t>(missing.size() - counts.done);
  progress_.unpinned = unpinned;
  progress_.state = progress_.skipped > 0 ? "stopped" : "done";
  progress_.finished_unix_ms = NowUnixMs();
  spdlog::info(
      "rewarm after {}: {} of {} ready ({} compiled now, {} failed, {} left for their first request), {} "
      "older entries unpinned, in {:.1f} s",
      why, progress_.ready, hot_set, progress_.compiled, progress_.failed, progress_.skipped, unpinned,
      std::chrono::duration<double>(Clock::now() - started).count());
}

}  // namespace jitd::serving
