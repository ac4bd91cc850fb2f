// Cache: the blob store and the index together, plus the background work
// (recency flush, budget eviction, WAL checkpoint, reconcile) that keeps the
// hit path free of writes.
#include "jitd/cache.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "blob_store.h"
#include "cache_index.h"
#include "jitd/base/text.h"

namespace jitd::cache {
namespace {

namespace fs = std::filesystem;
using detail::BlobStore;
using detail::CacheIndex;
using detail::IndexRow;
using detail::RowFilter;
using text::Cat;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

EntryInfo ToInfo(const IndexRow& r) {
  EntryInfo info{r.key,          r.kernel, r.params, r.arch,          r.size,      r.created_ms,
                 r.last_used_ms, r.hits,   r.pinned, r.nvrtc_version, r.compile_ms};
  for (size_t at = 0; at < r.options.size();) {
    const size_t end = std::min(r.options.find(' ', at), r.options.size());
    if (end > at) info.options.push_back(r.options.substr(at, end - at));
    at = end + 1;
  }
  return info;
}

IndexRow RowFromMeta(const EntryMeta& m, std::string checksum, uint64_t size) {
  IndexRow r;
  r.key = m.key;
  r.checksum = std::move(checksum);
  r.kernel = m.kernel;
  r.params = m.params;
  r.arch = m.arch;
  r.size = size;
  r.nvrtc_version = m.nvrtc_version;
  r.compile_ms = m.compile_ms;
  r.created_ms = m.created_unix_ms;
  r.last_used_ms = m.created_unix_ms;
  r.options = text::Join(m.request_options, " ");
  return r;
}

// Names of the cumulative counters in the index's counters table.
constexpr const char* kHits = "hits";
constexpr const char* kMisses = "misses";
constexpr const char* kEvictions = "evictions";
constexpr const char* kCorrupt = "corrupt";
constexpr const char* kPublishes = "publishes";
constexpr const char* kPublishFailures = "publish_failures";

}  // namespace

class Cache::Impl {
 public:
  explicit Impl(CacheOptions options) : opts_(std::move(options)), blobs_(opts_.dir), max_bytes_(opts_.max_bytes) {}

  ~Impl() {
    {
      std::lock_guard lock(bg_mu_);
      stop_ = true;
    }
    bg_cv_.notify_all();
    if (bg_.joinable()) bg_.join();
    if (!opts_.read_only && index_) {
      if (auto s = Maintain(); !s.ok())
        spdlog::warn("cache: final flush of {} failed: {}", opts_.dir.string(), s.ToString());
    }
  }

  absl::Status Open() {
    std::error_code ec;
    opts_.dir = fs::absolute(opts_.dir, ec);
    blobs_ = BlobStore(opts_.dir);
    fs::path index_path = opts_.dir / "index.sqlite";
    if (opts_.read_only) {
      if (!fs::exists(index_path)) {
        return absl::FailedPreconditionError(
            Cat("no cache index at ", index_path.string(), " (has this directory been warmed?)"));
      }
      auto index = CacheIndex::Open(index_path, true);
      if (!index.ok()) return index.status();
      index_ = std::move(*index);
      return absl::OkStatus();
    }
    if (auto s = blobs_.Init(); !s.ok()) return s;
    if (size_t n = blobs_.SweepTemp(opts_.orphan_grace); n > 0) {
      spdlog::info("cache: removed {} temp files left by stopped writers in {}", n, opts_.dir.string());
    }
    auto index = CacheIndex::Open(index_path, false);
    if (index.ok()) {
      auto check = (*index)->IntegrityCheck();
      if (!check.ok()) {
        index = check.status();
      } else if (*check != "ok") {
        index = absl::DataLossError(*check);
      }
    }
    if (!index.ok() && absl::IsDataLoss(index.status())) {
      // The index is unreadable; the blobs describe themselves, so move the
      // damaged file aside (for a post-mortem) and rebuild from them.
      absl::Status why = index.status();
      index = absl::StatusOr<std::unique_ptr<CacheIndex>>();  // close it
      std::string aside = Cat(index_path.string(), ".corrupt-", NowMs());
      spdlog::error("cache: index {} is unreadable ({}); moving it to {} and rebuilding from blobs",
                    index_path.string(), why.ToString(), aside);
      fs::rename(index_path, aside, ec);
      for (const char* suffix : {"-wal", "-shm"}) fs::remove(index_path.string() + suffix, ec);
      index = CacheIndex::Open(index_path, false);
      if (index.ok()) {
        index_ = std::move(*index);
        rebuilt_ = true;
        if (auto s = Reconcile(nullptr); !s.ok()) return s;
        reconcile_pending_ = false;
      }
    }
    if (!index_) {
      if (!index.ok()) {
        return absl::Status(index.status().code(),
                            Cat("cannot open cache index ", index_path.string(), ": ", index.status().message()));
      }
      index_ = std::move(*index);
    }
    if (opts_.background) {
      bg_ = std::thread([this] { BackgroundLoop(); });
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Entry> Lookup(std::string_view key_view, LookupCounting counting) {
    const bool counted = counting == LookupCounting::kCounted;
    std::string key(key_view);
    if (!IsValidKey(key)) return absl::InvalidArgumentError(Cat("malformed cache key '", key, "'"));
    auto row = index_->Find(key);
    if (!row.ok()) return row.status();
    if (!*row) return Miss(key, counted);
    const std::string& checksum = (*row)->checksum;
    fs::path path = blobs_.PathFor(key, checksum);
    auto bytes = blobs_.Read(path);
    if (!bytes.ok()) {
      if (!absl::IsNotFound(bytes.status())) return bytes.status();
      // Evicted by another thread or process between the row and the file?
      // DropCorrupt tells (an eviction deletes row and file together).
      DropCorrupt(key, checksum, path, "blob file missing", /*missing=*/true);
      return Miss(key, counted);
    }
    Entry entry;
    if (auto s = DecodeBlob(*bytes, &entry.meta, &entry.cubin); !s.ok()) {
      DropCorrupt(key, checksum, path, std::string(s.message()));
      return Miss(key, counted);
    }
    if (StoredBlobChecksum(*bytes) != checksum || entry.meta.key != key) {
      DropCorrupt(key, checksum, path, "blob does not match its index row");
      return Miss(key, counted);
    }
    entry.blob_path = std::move(path);
    entry.checksum = checksum;
    if (counted) RecordUse(key);
    return entry;
  }

  void RecordUse(std::string_view key) {
    hits_.fetch_add(1, std::memory_order_relaxed);
    if (opts_.read_only) return;
    // Recorded in memory only; the background thread writes it in batches.
    int64_t now = NowMs();
    std::lock_guard lock(recency_mu_);
    auto& u = recency_[std::string(key)];
    u.last_used_ms = std::max(u.last_used_ms, now);
    u.hits += 1;
  }

  void SetRemovalListener(Cache::RemovalListener listener) {
    std::lock_guard lock(listener_mu_);
    listener_ = std::make_shared<const Cache::RemovalListener>(std::move(listener));
  }

  absl::StatusOr<bool> Contains(std::string_view key) {
    auto row = index_->Find(std::string(key));
    if (!row.ok()) return row.status();
    return row->has_value();
  }

  absl::Status Publish(const EntryMeta& meta, std::string_view cubin) {
    if (opts_.read_only) return absl::FailedPreconditionError("cache opened read-only");
    if (!IsValidKey(meta.key)) {
      return absl::InvalidArgumentError(Cat("malformed cache key '", meta.key, "'"));
    }
    if (auto existing = index_->Find(meta.key); existing.ok() && *existing) return absl::OkStatus();
    EntryMeta m = meta;
    if (m.created_unix_ms == 0) m.created_unix_ms = NowMs();
    std::string bytes = EncodeBlob(m, cubin);
    std::string checksum = BlobChecksum(bytes);
    auto path = blobs_.Write(m.key, checksum, bytes, opts_.sync_writes);
    if (!path.ok()) {
      publish_failures_.fetch_add(1, std::memory_order_relaxed);
      return path.status();
    }
    auto stored = index_->InsertIfAbsent(RowFromMeta(m, checksum, bytes.size()));
    if (!stored.ok()) {
      blobs_.Remove(*path);
      publish_failures_.fetch_add(1, std::memory_order_relaxed);
      return stored.status();
    }
    if (*stored != checksum) {
      blobs_.Remove(*path);  // another writer published this key first
      return absl::OkStatus();
    }
    publishes_.fetch_add(1, std::memory_order_relaxed);
    if (uint64_t max = max_bytes_.load(); max > 0) {
      auto totals = index_->GetTotals();
      if (totals.ok() && totals->bytes > HighWatermark(max)) WakeBackground();
    }
    return absl::OkStatus();
  }

  absl::StatusOr<EvictResult> Evict(const EvictFilter& f) {
    if (opts_.read_only) return absl::FailedPreconditionError("cache opened read-only");
    if (f.keys.empty() && f.kernel_glob.empty() && f.arch.empty() && !f.older_than && !f.max_bytes) {
      return absl::InvalidArgumentError(
          "evict needs at least one filter: key, kernel glob, arch, older-than or max-bytes");
    }
    for (const auto& k : f.keys) {
      if (!IsValidKey(k)) return absl::InvalidArgumentError(Cat("malformed cache key '", k, "'"));
    }
    std::lock_guard lock(maintain_mu_);
    if (auto s = FlushRecency(); !s.ok()) return s;
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
    auto candidates = index_->Select(rf, /*newest_first=*/false, 0);
    if (!candidates.ok()) return candidates.status();
    auto totals = index_->GetTotals();
    if (!totals.ok()) return totals.status();
    std::vector<IndexRow> victims;
    if (f.max_bytes) {
      uint64_t bytes = totals->bytes;
      for (auto& r : *candidates) {
        if (bytes <= *f.max_bytes) break;
        bytes -= std::min(bytes, r.size);
        victims.push_back(std::move(r));
      }
    } else {
      victims = std::move(*candidates);
    }
    EvictResult result;
    result.dry_run = f.dry_run;
    if (f.dry_run) {
      for (const auto& v : victims) {
        result.evicted_bytes += v.size;
        result.evicted.push_back(ToInfo(v));
      }
      result.remaining_entries = totals->entries - result.evicted.size();
      result.remaining_bytes = totals->bytes - result.evicted_bytes;
      return result;
    }
    auto removed = RemoveRows(victims);
    if (!removed.ok()) return removed.status();
    for (const auto& v : *removed) {
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

  absl::Status Pin(std::string_view key, bool pinned) {
    if (opts_.read_only) return absl::FailedPreconditionError("cache opened read-only");
    auto found = index_->SetPinned(std::string(key), pinned);
    if (!found.ok()) return found.status();
    if (!*found) return absl::NotFoundError(Cat("no cache entry with key ", key));
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<EntryInfo>> List(const ListFilter& f) {
    if (!opts_.read_only) {
      std::lock_guard lock(maintain_mu_);
      if (auto s = FlushRecency(); !s.ok()) return s;
    }
    RowFilter rf;
    rf.kernel_glob = f.kernel_glob;
    rf.arch = f.arch;
    rf.params = f.params;
    rf.options = f.options;
    auto rows = index_->Select(rf, /*newest_first=*/true, f.limit);
    if (!rows.ok()) return rows.status();
    std::vector<EntryInfo> out;
    out.reserve(rows->size());
    for (const auto& r : *rows) out.push_back(ToInfo(r));
    return out;
  }

  absl::StatusOr<CacheStats> Stats() {
    auto totals = index_->GetTotals();
    if (!totals.ok()) return totals.status();
    auto counters = index_->Counters();
    if (!counters.ok()) return counters.status();
    auto get = [&](const char* name) {
      auto it = counters->find(name);
      return it == counters->end() ? uint64_t{0} : it->second;
    };
    CacheStats s;
    s.entries = totals->entries;
    s.bytes = totals->bytes;
    s.pinned_entries = totals->pinned_entries;
    s.pinned_bytes = totals->pinned_bytes;
    s.max_bytes = max_bytes_.load();
    s.high_watermark_bytes = HighWatermark(s.max_bytes);
    s.low_watermark_bytes = LowWatermark(s.max_bytes);
    s.hits = get(kHits) + hits_.load();
    s.misses = get(kMisses) + misses_.load();
    s.evictions = get(kEvictions) + evictions_.load();
    s.corrupt = get(kCorrupt) + corrupt_.load();
    s.publishes = get(kPublishes) + publishes_.load();
    s.publish_failures = get(kPublishFailures) + publish_failures_.load();
    return s;
  }

  absl::StatusOr<VerifyReport> Verify(bool repair) {
    if (repair && opts_.read_only) return absl::FailedPreconditionError("cache opened read-only: cannot repair");
    VerifyReport report;
    auto integrity = index_->IntegrityCheck();
    report.index_integrity = integrity.ok() ? *integrity : integrity.status().ToString();
    auto rows = index_->Select(RowFilter{}, false, 0);
    if (!rows.ok()) return rows.status();
    for (const auto& r : *rows) {
      ++report.checked;
      fs::path path = blobs_.PathFor(r.key, r.checksum);
      auto bytes = blobs_.Read(path);
      std::string problem;
      bool missing = false;
      if (!bytes.ok()) {
        missing = absl::IsNotFound(bytes.status());
        problem = missing ? "blob file missing" : std::string(bytes.status().message());
      } else if (auto s = DecodeBlob(*bytes, nullptr, nullptr); !s.ok()) {
        problem = std::string(s.message());
      } else if (StoredBlobChecksum(*bytes) != r.checksum) {
        problem = "blob does not match its index row";
      }
      if (problem.empty()) {
        ++report.ok;
        continue;
      }
      if (missing) {
        // An entry evicted while we read is not a problem. Evictions delete
        // row and file in one write transaction, so the question is asked
        // under the write lock: no eviction is half done then.
        bool really_missing = false;
        if (repair) {
          really_missing = DropCorrupt(r.key, r.checksum, path, problem, /*missing=*/true);
        } else {
          auto again = index_->FindSerialized(r.key);
          std::error_code ec;
          really_missing = again.ok() && *again && (*again)->checksum == r.checksum && !fs::exists(path, ec) && !ec;
        }
        if (!really_missing) {
          --report.checked;
          continue;
        }
        ++report.missing_blobs;
        report.problems.push_back(Cat(r.key, " (", r.kernel, " ", r.arch, "): ", problem));
        if (repair) ++report.repaired;
        continue;
      }
      ++report.corrupt;
      report.problems.push_back(Cat(r.key, " (", r.kernel, " ", r.arch, "): ", problem));
      if (repair) {
        DropCorrupt(r.key, r.checksum, path, problem);
        ++report.repaired;
      }
    }
    // Under maintain_mu_: this process's budget eviction and reconcile do
    // not interleave with it (other processes are kept apart by the index's
    // write transactions).
    std::lock_guard lock(maintain_mu_);
    if (auto s = Reconcile(&report, repair, /*drop_missing_rows=*/false); !s.ok()) return s;
    return report;
  }

  absl::Status Maintain() {
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

  void SetMaxBytes(uint64_t max) {
    max_bytes_.store(max);
    WakeBackground();
  }

  const fs::path& dir() const { return opts_.dir; }
  bool rebuilt() const { return rebuilt_; }

 private:
  uint64_t HighWatermark(uint64_t max) const {
    return static_cast<uint64_t>(static_cast<double>(max) * opts_.high_watermark);
  }
  uint64_t LowWatermark(uint64_t max) const {
    return static_cast<uint64_t>(static_cast<double>(max) * opts_.low_watermark);
  }

  absl::Status Miss(const std::string& key, bool counted) {
    if (counted) misses_.fetch_add(1, std::memory_order_relaxed);
    return absl::NotFoundError(Cat("no cache entry for key ", key));
  }

  // Drops an entry whose blob is damaged, or (with `missing`) gone.
  // Returns whether it counted as corrupt. A blob gone because an eviction
  // removed it is not: the eviction deletes row and file inside one write
  // transaction, so by the time this Remove gets the write lock the row is
  // gone too, and nothing is counted, logged or reported.
  bool DropCorrupt(const std::string& key, const std::string& checksum, const fs::path& path, std::string_view why,
                   bool missing = false) {
    bool removed_row = false;
    if (!opts_.read_only) {
      auto removed = index_->Remove({{key, checksum}}, [&](size_t) { blobs_.Remove(path); });
      if (!removed.ok()) {
        spdlog::warn("cache: dropping {} from the index failed: {}", key, removed.status().ToString());
      } else {
        removed_row = (*removed)[0];
        if (missing && !removed_row) return false;  // evicted meanwhile
      }
      blobs_.Remove(path);  // a damaged file goes even when its row changed
    }
    corrupt_.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("cache: entry {} is corrupt ({}): {}; {}", key, path.string(), why,
                 opts_.read_only ? "skipped (read-only)" : "dropped");
    if (removed_row) NotifyRemoved({key});
    return true;
  }

  void NotifyRemoved(const std::vector<std::string>& keys) {
    if (keys.empty()) return;
    std::shared_ptr<const Cache::RemovalListener> listener;
    {
      std::lock_guard lock(listener_mu_);
      listener = listener_;
    }
    if (listener && *listener) (*listener)(keys);
  }

  // Deletes index rows in batches (bounding how long the write lock is
  // held), then their files. Returns the rows actually removed.
  absl::StatusOr<std::vector<IndexRow>> RemoveRows(const std::vector<IndexRow>& rows) {
    std::vector<IndexRow> removed;
    for (size_t start = 0; start < rows.size(); start += opts_.evict_batch) {
      size_t end = std::min(rows.size(), start + opts_.evict_batch);
      std::vector<std::pair<std::string, std::string>> batch;
      for (size_t i = start; i < end; ++i) batch.emplace_back(rows[i].key, rows[i].checksum);
      // Files are deleted inside the transaction (see CacheIndex::Remove):
      // a reconcile in another process never re-indexes them, and a reader
      // never counts them as missing.
      auto done = index_->Remove(
          batch, [&](size_t i) { blobs_.Remove(blobs_.PathFor(rows[start + i].key, rows[start + i].checksum)); });
      if (!done.ok()) return done.status();
      std::vector<std::string> keys;
      for (size_t i = start; i < end; ++i) {
        if (!(*done)[i - start]) continue;  // changed or removed by another process
        removed.push_back(rows[i]);
        keys.push_back(rows[i].key);
      }
      NotifyRemoved(keys);
    }
    evictions_.fetch_add(removed.size(), std::memory_order_relaxed);
    return removed;
  }

  absl::Status EvictToBudget() {
    uint64_t max = max_bytes_.load();
    if (max == 0 || opts_.read_only) return absl::OkStatus();
    auto totals = index_->GetTotals();
    if (!totals.ok()) return totals.status();
    if (totals->bytes <= HighWatermark(max)) return absl::OkStatus();
    uint64_t bytes = totals->bytes;
    const uint64_t target = LowWatermark(max);
    size_t evicted = 0;
    uint64_t freed = 0;
    RowFilter unpinned;
    unpinned.unpinned_only = true;
    while (bytes > target) {
      auto batch = index_->Select(unpinned, /*newest_first=*/false, opts_.evict_batch);
      if (!batch.ok()) return batch.status();
      std::vector<IndexRow> victims;
      uint64_t projected = bytes;
      for (auto& r : *batch) {
        if (projected <= target) break;
        projected -= std::min(projected, r.size);
        victims.push_back(std::move(r));
      }
      if (victims.empty()) {
        spdlog::warn("cache: {} bytes exceed the budget of {} but only pinned entries remain", bytes, max);
        break;
      }
      auto removed = RemoveRows(victims);
      if (!removed.ok()) return removed.status();
      for (const auto& r : *removed) {
        bytes -= std::min(bytes, r.size);
        freed += r.size;
      }
      evicted += removed->size();
      if (removed->empty()) break;  // another process is evicting the same rows
    }
    if (evicted > 0) {
      spdlog::info("cache: evicted {} least recently used entries ({} bytes) to stay within {} bytes", evicted, freed,
                   max);
    }
    return absl::OkStatus();
  }

  absl::Status FlushRecency() {
    if (opts_.read_only) return absl::OkStatus();
    std::unordered_map<std::string, detail::RecencyUpdate> pending;
    {
      std::lock_guard lock(recency_mu_);
      pending.swap(recency_);
    }
    std::vector<detail::RecencyUpdate> updates;
    updates.reserve(pending.size());
    for (auto& [key, u] : pending) updates.push_back({key, u.last_used_ms, u.hits});
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

 public:
  // Makes the index and the blob files agree: indexes valid blobs that have
  // no row (a writer killed between rename and insert), removes blobs that
  // are corrupt or lost a publish race, and (at open) drops rows whose blob
  // is gone. With `report`, records what it found.
  absl::Status Reconcile(VerifyReport* report, bool repair = true, bool drop_missing_rows = true) {
    auto keys = index_->AllKeys();
    if (!keys.ok()) return keys.status();
    std::unordered_map<std::string, std::string> rows(keys->begin(), keys->end());
    std::unordered_set<std::string> seen;
    size_t adopted = 0, removed = 0;
    blobs_.ForEachBlob([&](const fs::path& path, std::string_view key, std::string_view checksum) {
      if (key.empty()) {
        if (report) report->problems.push_back(Cat(path.string(), ": not a jitd blob file"));
        return;
      }
      std::string k(key);
      auto it = rows.find(k);
      if (it != rows.end() && it->second == checksum) {
        seen.insert(k);
        return;
      }
      if (report) {
        ++report->orphan_blobs;
        report->problems.push_back(Cat(path.string(), ": blob without an index row"));
      }
      if (!repair) return;
      if (it != rows.end()) {
        // The rows were read before the walk: the entry may have been
        // evicted and published again since, with this very blob. Only a
        // blob that is not the key's current one is a stray.
        auto now_row = index_->Find(k);
        if (!now_row.ok()) return;
        if (*now_row && (*now_row)->checksum == checksum) {
          seen.insert(k);
          if (report) {
            --report->orphan_blobs;
            report->problems.pop_back();
          }
          return;
        }
        if (*now_row) {
          blobs_.Remove(path);  // the loser of a publish race, or a stale copy
          ++removed;
          if (report) ++report->repaired;
          return;
        }
        // No row now: an orphan, adopted below if intact.
      }
      auto bytes = blobs_.Read(path);
      EntryMeta meta;
      if (!bytes.ok()) return;
      if (!DecodeBlob(*bytes, &meta, nullptr).ok() || meta.key != k || StoredBlobChecksum(*bytes) != checksum) {
        corrupt_.fetch_add(1, std::memory_order_relaxed);
        blobs_.Remove(path);
        ++removed;
        if (report) ++report->repaired;
        return;
      }
      // Adopted only if the file is still there under the write lock: an
      // eviction in another process deletes its files inside its own
      // transaction, so this never brings back a row for a blob that is
      // being deleted.
      auto stored = index_->InsertIfAbsent(RowFromMeta(meta, std::string(checksum), bytes->size()), [&] {
        std::error_code ec;
        return fs::exists(path, ec);
      });
      if (stored.ok() && stored->empty()) {
        // Gone meanwhile: evicted. Not a problem, nothing repaired.
        if (report) {
          --report->orphan_blobs;
          report->problems.pop_back();
        }
        return;
      }
      if (stored.ok() && *stored != checksum) {
        blobs_.Remove(path);
        ++removed;
      } else if (stored.ok()) {
        ++adopted;
        seen.insert(k);
      }
      if (report) ++report->repaired;
    });
    size_t dropped = 0;
    if (drop_missing_rows) {
      std::vector<IndexRow> gone;
      for (const auto& [key, checksum] : rows) {
        if (seen.count(key)) continue;
        std::error_code ec;
        if (fs::exists(blobs_.PathFor(key, checksum), ec) || ec) continue;
        IndexRow r;
        r.key = key;
        r.checksum = checksum;
        gone.push_back(std::move(r));
      }
      std::vector<std::pair<std::string, std::string>> pairs;
      for (const auto& r : gone) pairs.emplace_back(r.key, r.checksum);
      if (!pairs.empty()) {
        auto done = index_->Remove(pairs);
        if (!done.ok()) return done.status();
        std::vector<std::string> dropped_keys;
        for (size_t i = 0; i < pairs.size(); ++i) {
          if ((*done)[i]) dropped_keys.push_back(pairs[i].first);
        }
        dropped = dropped_keys.size();
        corrupt_.fetch_add(dropped, std::memory_order_relaxed);
        NotifyRemoved(dropped_keys);
      }
    }
    if (adopted + removed + dropped > 0) {
      spdlog::info(
          "cache: reconciled {}: indexed {} blobs without rows, removed {} stray blobs, dropped {} rows "
          "without blobs",
          opts_.dir.string(), adopted, removed, dropped);
    }
    return absl::OkStatus();
  }

 private:
  void WakeBackground() {
    {
      std::lock_guard lock(bg_mu_);
      wake_ = true;
    }
    bg_cv_.notify_all();
  }

  void BackgroundLoop() {
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

  CacheOptions opts_;
  BlobStore blobs_;
  std::unique_ptr<CacheIndex> index_;
  bool rebuilt_ = false;
  std::atomic<uint64_t> max_bytes_;
  // Set at open: the first Maintain() reconciles index and blob files.
  std::atomic<bool> reconcile_pending_{true};

  std::mutex recency_mu_;
  std::unordered_map<std::string, detail::RecencyUpdate> recency_;
  // This process's counter deltas not yet written to the index.
  std::atomic<uint64_t> hits_{0}, misses_{0}, evictions_{0}, corrupt_{0}, publishes_{0}, publish_failures_{0};

  std::mutex maintain_mu_;  // one flush/eviction/reconcile at a time in this process
  std::mutex listener_mu_;
  std::shared_ptr<const Cache::RemovalListener> listener_;  // guarded by listener_mu_
  std::mutex bg_mu_;
  std::condition_variable bg_cv_;
  bool stop_ = false;
  bool wake_ = false;
  std::string last_error_;
  std::thread bg_;
};

absl::StatusOr<std::unique_ptr<Cache>> Cache::Open(const CacheOptions& options) {
  if (options.dir.empty()) return absl::InvalidArgumentError("cache directory not set");
  if (!(options.low_watermark > 0 && options.low_watermark <= options.high_watermark && options.high_watermark <= 1)) {
    return absl::InvalidArgumentError("cache watermarks must satisfy 0 < low <= high <= 1");
  }
  if (options.evict_batch == 0) return absl::InvalidArgumentError("evict_batch must be positive");
  auto impl = std::make_unique<Impl>(options);
  if (auto s = impl->Open(); !s.ok()) return s;
  return std::unique_ptr<Cache>(new Cache(std::move(impl)));
}

Cache::Cache(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Cache::~Cache() = default;
absl::StatusOr<Entry> Cache::Lookup(std::string_view key, LookupCounting counting) {
  return impl_->Lookup(key, counting);
}
absl::StatusOr<bool> Cache::Contains(std::string_view key) { return impl_->Contains(key); }
void Cache::RecordUse(std::string_view key) { impl_->RecordUse(key); }
void Cache::SetRemovalListener(RemovalListener listener) { impl_->SetRemovalListener(std::move(listener)); }
absl::Status Cache::Publish(const EntryMeta& meta, std::string_view cubin) { return impl_->Publish(meta, cubin); }
absl::StatusOr<EvictResult> Cache::Evict(const EvictFilter& filter) { return impl_->Evict(filter); }
absl::Status Cache::Pin(std::string_view key, bool pinned) { return impl_->Pin(key, pinned); }
absl::StatusOr<std::vector<EntryInfo>> Cache::List(const ListFilter& filter) { return impl_->List(filter); }
absl::StatusOr<CacheStats> Cache::Stats() { return impl_->Stats(); }
absl::StatusOr<VerifyReport> Cache::Verify(bool repair) { return impl_->Verify(repair); }
absl::Status Cache::Flush() { return impl_->Maintain(); }
void Cache::SetMaxBytes(uint64_t max_bytes) { impl_->SetMaxBytes(max_bytes); }
const std::filesystem::path& Cache::dir() const { return impl_->dir(); }
bool Cache::rebuilt_index() const { return impl_->rebuilt(); }

}  // namespace jitd::cache
