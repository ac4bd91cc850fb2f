// Cache: the blob store and the index together (cache_impl.h): open, the
// hit path (which never writes: recency goes through the background
// flush), publishes, listings and statistics.
#include <spdlog/spdlog.h>

#include "cache_impl.h"
#include "jitd/base/status.h"

namespace jitd::cache {
namespace detail {

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

}  // namespace detail

Cache::Impl::~Impl() {
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

absl::Status Cache::Impl::Open() {
  std::error_code ec;
  opts_.dir = fs::absolute(opts_.dir, ec);
  blobs_ = BlobStore(opts_.dir);
  fs::path index_path = opts_.dir / "index.sqlite";
  if (opts_.read_only) {
    if (!fs::exists(index_path)) {
      return absl::FailedPreconditionError(
          Cat("no cache index at ", index_path.string(), " (has this directory been warmed?)"));
    }
    JITD_ASSIGN_OR_RETURN(auto index, CacheIndex::Open(index_path, true));
    index_ = std::move(index);
    return absl::OkStatus();
  }
  JITD_RETURN_IF_ERROR(blobs_.Init());
  if (size_t n = blobs_.SweepTemp(opts_.orphan_grace); n > 0) {
    spdlog::info("cache: removed {} temp files left by stopped writers in {}", n, opts_.dir.string());
  }
  // No index beside blobs (deleted by hand, or lost): the blobs describe
  // themselves, so they are indexed before the first request, as after an
  // unreadable index, rather than by the background reconcile while
  // requests recompile what is on disk.
  const bool index_existed = fs::exists(index_path, ec);
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
    spdlog::error("cache: index {} is unreadable ({}); moving it to {} and rebuilding from blobs", index_path.string(),
                  why.ToString(), aside);
    fs::rename(index_path, aside, ec);
    for (const char* suffix : {"-wal", "-shm"}) fs::remove(Cat(index_path.string(), suffix), ec);
    index = CacheIndex::Open(index_path, false);
    if (index.ok()) {
      index_ = std::move(*index);
      rebuilt_ = true;
      JITD_RETURN_IF_ERROR(Reconcile(nullptr));
      reconcile_pending_ = false;
    }
  }
  if (!index_) {
    if (!index.ok()) {
      return absl::Status(index.status().code(),
                          Cat("cannot open cache index ", index_path.string(), ": ", index.status().message()));
    }
    index_ = std::move(*index);
    if (!index_existed) {
      JITD_RETURN_IF_ERROR(Reconcile(nullptr));
      reconcile_pending_ = false;
    }
  }
  if (opts_.background) {
    bg_ = std::thread([this] { BackgroundLoop(); });
  }
  return absl::OkStatus();
}

absl::StatusOr<Entry> Cache::Impl::Lookup(std::string_view key_view, LookupCounting counting) {
  const bool counted = counting == LookupCounting::kCounted;
  std::string key(key_view);
  if (!IsValidKey(key)) return absl::InvalidArgumentError(Cat("malformed cache key '", key, "'"));
  JITD_ASSIGN_OR_RETURN(auto row, index_->Find(key));
  if (!row) return Miss(key, counted);
  const std::string& checksum = row->checksum;
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
  const std::string stored_checksum = StoredBlobChecksum(*bytes);
  // The cubin is made from the buffer just read: a second one as large
  // would be fresh pages to fault in and fill on every disk hit.
  if (auto s = DecodeBlobInPlace(*bytes, &entry.meta); !s.ok()) {
    DropCorrupt(key, checksum, path, std::string(s.message()));
    return Miss(key, counted);
  }
  if (stored_checksum != checksum || entry.meta.key != key) {
    DropCorrupt(key, checksum, path, "blob does not match its index row");
    return Miss(key, counted);
  }
  entry.cubin = *std::move(bytes);
  entry.blob_path = std::move(path);
  entry.checksum = checksum;
  if (counted) RecordUse(key);
  return entry;
}

void Cache::Impl::RecordUse(std::string_view key) {
  hits_.fetch_add(1, std::memory_order_relaxed);
  if (opts_.read_only) return;
  // Recorded in memory only; the background thread writes it in batches.
  int64_t now = NowMs();
  std::lock_guard lock(recency_mu_);
  auto& u = recency_[std::string(key)];
  u.last_used_ms = std::max(u.last_used_ms, now);
  u.hits += 1;
}

void Cache::Impl::SetRemovalListener(Cache::RemovalListener listener) {
  std::lock_guard lock(listener_mu_);
  listener_ = std::make_shared<const Cache::RemovalListener>(std::move(listener));
}

absl::StatusOr<bool> Cache::Impl::Contains(std::string_view key) {
  JITD_ASSIGN_OR_RETURN(auto row, index_->Find(std::string(key)));
  return row.has_value();
}

absl::Status Cache::Impl::Publish(const EntryMeta& meta, std::string_view cubin, std::optional<Entry>* sealed) {
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
  if (sealed != nullptr) {
    Entry& entry = sealed->emplace();
    entry.meta = std::move(m);
    entry.blob_path = *std::move(path);
    entry.checksum = std::move(checksum);
  }
  if (uint64_t max = max_bytes_.load(); max > 0) {
    auto totals = index_->GetTotals();
    if (totals.ok() && totals->bytes > HighWatermark(max)) WakeBackground();
  }
  return absl::OkStatus();
}

absl::Status Cache::Impl::Pin(std::string_view key, bool pinned) {
  if (opts_.read_only) return absl::FailedPreconditionError("cache opened read-only");
  JITD_ASSIGN_OR_RETURN(auto found, index_->SetPinned(std::string(key), pinned));
  if (!found) return absl::NotFoundError(Cat("no cache entry with key ", key));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<EntryInfo>> Cache::Impl::List(const ListFilter& f) {
  std::vector<EntryInfo> out;
  JITD_RETURN_IF_ERROR(ForEach(f, [&](const EntryInfo& info) {
    out.push_back(info);
    return true;
  }));
  return out;
}

absl::Status Cache::Impl::ForEach(const ListFilter& f, const std::function<bool(const EntryInfo&)>& visit) {
  if (!opts_.read_only) {
    std::lock_guard lock(maintain_mu_);
    JITD_RETURN_IF_ERROR(FlushRecency());
  }
  RowFilter rf;
  rf.kernel_glob = f.kernel_glob;
  rf.arch = f.arch;
  rf.params = f.params;
  rf.options = f.options;
  return index_->Visit(rf, /*newest_first=*/true, f.limit, [&](const IndexRow& row) { return visit(ToInfo(row)); });
}

absl::StatusOr<uint64_t> Cache::Impl::LargestInstantiation() { return index_->LargestInstantiation(); }

absl::StatusOr<CacheStats> Cache::Impl::Stats() {
  JITD_ASSIGN_OR_RETURN(auto totals, index_->GetTotals());
  // The index's counters and this process's unflushed deltas are read
  // under counters_mu_, so a flush in flight is seen whole or not at all.
  std::lock_guard counters_lock(counters_mu_);
  JITD_ASSIGN_OR_RETURN(auto counters, index_->Counters());
  auto get = [&](const char* name) {
    auto it = counters.find(name);
    return it == counters.end() ? uint64_t{0} : it->second;
  };
  CacheStats s;
  s.entries = totals.entries;
  s.bytes = totals.bytes;
  s.pinned_entries = totals.pinned_entries;
  s.pinned_bytes = totals.pinned_bytes;
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

void Cache::Impl::SetMaxBytes(uint64_t max) {
  max_bytes_.store(max);
  WakeBackground();
}

absl::Status Cache::Impl::Miss(const std::string& key, bool counted) {
  if (counted) misses_.fetch_add(1, std::memory_order_relaxed);
  return absl::NotFoundError(Cat("no cache entry for key ", key));
}

bool Cache::Impl::DropCorrupt(const std::string& key, const std::string& checksum, const fs::path& path,
                              std::string_view why, bool missing) {
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

void Cache::Impl::NotifyRemoved(const std::vector<std::string>& keys) {
  if (keys.empty()) return;
  std::shared_ptr<const Cache::RemovalListener> listener;
  {
    std::lock_guard lock(listener_mu_);
    listener = listener_;
  }
  if (listener && *listener) (*listener)(keys);
}

absl::StatusOr<std::unique_ptr<Cache>> Cache::Open(const CacheOptions& options) {
  if (options.dir.empty()) return absl::InvalidArgumentError("cache directory not set");
  if (!(options.low_watermark > 0 && options.low_watermark <= options.high_watermark && options.high_watermark <= 1)) {
    return absl::InvalidArgumentError("cache watermarks must satisfy 0 < low <= high <= 1");
  }
  if (options.evict_batch == 0) return absl::InvalidArgumentError("evict_batch must be positive");
  auto impl = std::make_unique<Impl>(options);
  JITD_RETURN_IF_ERROR(impl->Open());
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
absl::Status Cache::Publish(const EntryMeta& meta, std::string_view cubin, std::optional<Entry>* sealed) {
  return impl_->Publish(meta, cubin, sealed);
}
absl::StatusOr<EvictResult> Cache::Evict(const EvictFilter& filter) { return impl_->Evict(filter); }
absl::Status Cache::Pin(std::string_view key, bool pinned) { return impl_->Pin(key, pinned); }
absl::StatusOr<std::vector<EntryInfo>> Cache::List(const ListFilter& filter) { return impl_->List(filter); }
absl::Status Cache::ForEach(const ListFilter& filter, const std::function<bool(const EntryInfo&)>& visit) {
  return impl_->ForEach(filter, visit);
}
absl::StatusOr<uint64_t> Cache::LargestInstantiation() { return impl_->LargestInstantiation(); }
absl::StatusOr<CacheStats> Cache::Stats() { return impl_->Stats(); }
absl::StatusOr<VerifyReport> Cache::Verify(bool repair) { return impl_->Verify(repair); }
absl::Status Cache::Flush() { return impl_->Maintain(); }
void Cache::SetMaxBytes(uint64_t max_bytes) { impl_->SetMaxBytes(max_bytes); }
const std::filesystem::path& Cache::dir() const { return impl_->dir(); }
bool Cache::rebuilt_index() const { return impl_->rebuilt(); }

}  // namespace jitd::cache
