// Cache's background work: the recency flush, budget eviction and explicit
// evictions, the WAL checkpoint (Maintain), and the thread that runs them.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "cache_impl.h"
#include "jitd/base/status.h"

namespace jitd::cache {
absl::StatusOr<EvictResult> Cache::Impl::Evict(const EvictFilter& f) {
  if (opts_.read_only) return absl::FailedPreconditionError("cache opened read-only");
  if (f.keys.empty() && f.kernel_glob.empty() && f.arch.empty() && !f.older_than && !f.max_bytes) {
    return absl::InvalidArgumentError(
        "evict needs at least one filter: key, kernel glob, arch, older-than or max-bytes");
  }
  for (const auto& k : f.keys) {
    if (!IsValidKey(k)) return absl::InvalidArgumentError(Cat("malformed cache key '", k, "'"));
  }
  std::lock_guard lock(maintain_mu_);
  JITD_RETURN_IF_ERROR(FlushRecency());
  RowFilter rf;
  rf.keys = f.keys;
  rf.kernel_glob = f.kernel_glob;
  rf.arch = f.arch;
  rf.unpinned_only = !f.include_pinned;
  if (f.older_than) {
    if (f.older_than->count() < 0) return absl::InvalidArgumentError("older-than must not be negative");
    // In seconds, compared before any multiplication: an age beyond the
    // epoch (2^62 s, say) selects nothing instead of overflowing.
    const int64_t now_ms = NowMs();
    rf.last_used_before_ms =
        f.older_than->count() > now_ms / 1000 ? int64_t{-1} : now_ms - f.older_than->count() * 1000;
  }
  JITD_ASSIGN_OR_RETURN(auto candidates, index_->Select(rf, /*newest_first=*/false, 0));
  JITD_ASSIGN_OR_RETURN(auto totals, index_->GetTotals());
  std::vector<IndexRow> victims;
  if (f.max_bytes) {
    uint64_t bytes = totals.bytes;
    for (auto& r : candidates) {
      if (bytes <= *f.max_bytes) break;
      bytes -= std::min(bytes, r.size);
      victims.push_back(std::move(r));
    }
  } else {
    victims = std::move(candidates);
  }
  EvictResult result;
  result.dry_run = f.dry_run;
  if (f.dry_run) {
    for (const auto& v : victims) {
      result.evicted_bytes += v.size;
      result.evicted.push_back(ToInfo(v));
    }
    result.remaining_entries = totals.entries - result.evicted.size();
    result.remaining_bytes = totals.bytes - result.evicted_bytes;
    return result;
  }
  JITD_ASSIGN_OR_RETURN(auto removed, RemoveRows(victims));
  for (const auto& v : removed) {
    result.evicted_bytes += v.size;
    result.evicted.push_back(ToInfo(v));
  }
  if (!result.evicted.empty()) {
    spdlog::info("cache: evicted {} entries ({} bytes) on request", result.evicted.size(), result.evicted_bytes);
  }
  auto after = index_->GetTotals();
  if (after.ok()) {
    result.remaining_entries = after->entries;
    result.remaining_bytes = after->bytes;
  }
  return result;
}

absl::Status Cache::Impl::Maintain() {
  if (opts_.read_only) return absl::OkStatus();
  std::lock_guard lock(maintain_mu_);
  absl::Status status;
  if (reconcile_pending_.exchange(false)) {
    if (auto s = Reconcile(nullptr); !s.ok()) {
      reconcile_pending_ = true;
      status = s;
    }
  }
  if (auto s = FlushRecency(); !s.ok() && status.ok()) status = s;
  if (auto s = EvictToBudget(); !s.ok() && status.ok()) status = s;
  if (auto s = index_->Checkpoint(); !s.ok() && status.ok()) status = s;
  return status;
}

uint64_t Cache::Impl::HighWatermark(uint64_t max) const {
  return static_cast<uint64_t>(static_cast<double>(max) * opts_.high_watermark);
}

uint64_t Cache::Impl::LowWatermark(uint64_t max) const {
  return static_cast<uint64_t>(static_cast<double>(max) * opts_.low_watermark);
}

absl::StatusOr<std::vector<IndexRow>> Cache::Impl::RemoveRows(const std::vector<IndexRow>& rows) {
  std::vector<IndexRow> removed;
  for (size_t start = 0; start < rows.size(); start += opts_.evict_batch) {
    size_t end = std::min(rows.size(), start + opts_.evict_batch);
    std::vector<std::pair<std::string, std::string>> batch;
    for (size_t i = start; i < end; ++i) batch.emplace_back(rows[i].key, rows[i].checksum);
    // Files are deleted inside the transaction (see CacheIndex::Remove):
    // a reconcile in another process never re-indexes them, and a reader
    // never counts them as missing.
    JITD_ASSIGN_OR_RETURN(std::vector<bool> done, index_->Remove(batch, [&](size_t i) {
      blobs_.Remove(blobs_.PathFor(rows[start + i].key, rows[start + i].checksum));
    }));
    std::vector<std::string> keys;
    for (size_t i = start; i < end; ++i) {
      if (!done[i - start]) continue;  // changed or removed by another process
      removed.push_back(rows[i]);
      keys.push_back(rows[i].key);
    }
    NotifyRemoved(keys);
  }
  evictions_.fetch_add(removed.size(), std::memory_order_relaxed);
  return removed;
}

absl::Status Cache::Impl::EvictToBudget() {
  uint64_t max = max_bytes_.load();
  if (max == 0 || opts_.read_only) return absl::OkStatus();
  JITD_ASSIGN_OR_RETURN(auto totals, index_->GetTotals());
  if (totals.bytes <= HighWatermark(max)) return absl::OkStatus();
  uint64_t bytes = totals.bytes;
  const uint64_t target = LowWatermark(max);
  size_t evicted = 0;
  uint64_t freed = 0;
  RowFilter unpinned;
  unpinned.unpinned_only = true;
  while (bytes > target) {
    JITD_ASSIGN_OR_RETURN(auto batch, index_->Select(unpinned, /*newest_first=*/false, opts_.evict_batch));
    std::vector<IndexRow> victims;
    uint64_t projected = bytes;
    for (auto& r : batch) {
      if (projected <= target) break;
      projected -= std::min(projected, r.size);
      victims.push_back(std::move(r));
    }
    if (victims.empty()) {
      spdlog::warn("cache: {} bytes exceed the budget of {} but only pinned entries remain", bytes, max);
      break;
    }
    JITD_ASSIGN_OR_RETURN(auto removed, RemoveRows(victims));
    for (const auto& r : removed) {
      bytes -= std::min(bytes, r.size);
      freed += r.size;
    }
    evicted += removed.size();
    if (removed.empty()) break;  // another process is evicting the same rows
  }
  if (evicted > 0) {
    spdlog::info("cache: evicted {} least recently used entries ({} bytes) to stay within {} bytes", evicted, freed,
                 max);
  }
  return absl::OkStatus();
}

absl::Status Cache::Impl::FlushRecency() {
  if (opts_.read_only) return absl::OkStatus();
  std::unordered_map<std::string, detail::RecencyUpdate> pending;
  {
    std::lock_guard lock(recency_mu_);
    pending.swap(recency_);
  }
  std::vector<detail::RecencyUpdate> updates;
  updates.reserve(pending.size());
  for (auto& [key, u] : pending) updates.push_back({key, u.last_used_ms, u.hits});
  std::lock_guard counters_lock(counters_mu_);
  std::map<std::string, uint64_t> counters = {
      {kHits, hits_.exchange(0)},           {kMisses, misses_.exchange(0)},
      {kEvictions, evictions_.exchange(0)}, {kCorrupt, corrupt_.exchange(0)},
      {kPublishes, publishes_.exchange(0)}, {kPublishFailures, publish_failures_.exchange(0)},
  };
  absl::Status s = index_->Apply(updates, counters);
  if (!s.ok()) {
    // Put everything back for the next round; nothing is lost.
    hits_ += counters[kHits];
    misses_ += counters[kMisses];
    evictions_ += counters[kEvictions];
    corrupt_ += counters[kCorrupt];
    publishes_ += counters[kPublishes];
    publish_failures_ += counters[kPublishFailures];
    std::lock_guard lock(recency_mu_);
    for (auto& u : updates) {
      auto& cur = recency_[u.key];
      cur.last_used_ms = std::max(cur.last_used_ms, u.last_used_ms);
      cur.hits += u.hits;
    }
  }
  return s;
}

void Cache::Impl::WakeBackground() {
  {
    std::lock_guard lock(bg_mu_);
    wake_ = true;
  }
  bg_cv_.notify_all();
}

void Cache::Impl::BackgroundLoop() {
  std::unique_lock lock(bg_mu_);
  bool first = true;  // reconcile right after open, then every interval
  while (!stop_) {
    if (!first) bg_cv_.wait_for(lock, opts_.flush_interval, [this] { return stop_ || wake_; });
    first = false;
    if (stop_) break;
    wake_ = false;
    lock.unlock();
    if (auto s = Maintain(); !s.ok()) {
      // Logged once per kind of failure in a row, not every interval.
      std::string msg = s.ToString();
      if (msg != last_error_) spdlog::warn("cache: background maintenance failed: {}", msg);
      last_error_ = msg;
    } else {
      last_error_.clear();
    }
    lock.lock();
  }
}

}  // namespace jitd::cache
