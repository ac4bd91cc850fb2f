// Cache::Impl, the cache behind jitd/cache.h, shared by its three files:
//   cache.cpp              open, lookups, publishes, listings, statistics
//   cache_maintenance.cpp  eviction, the recency flush, the background thread
//   cache_reconcile.cpp    making the index and the blob files agree; Verify
// Internal: nothing outside cache/src includes it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "blob_store.h"
#include "cache_index.h"
#include "jitd/base/text.h"
#include "jitd/cache.h"

namespace jitd::cache {
namespace detail {

// Milliseconds since the Unix epoch.
int64_t NowMs();
// The listing of a row.
EntryInfo ToInfo(const IndexRow& r);
// The row that indexes a blob of `m`.
IndexRow RowFromMeta(const EntryMeta& m, std::string checksum, uint64_t size);

// Names of the cumulative counters in the index's counters table.
inline constexpr const char* kHits = "hits";
inline constexpr const char* kMisses = "misses";
inline constexpr const char* kEvictions = "evictions";
inline constexpr const char* kCorrupt = "corrupt";
inline constexpr const char* kPublishes = "publishes";
inline constexpr const char* kPublishFailures = "publish_failures";

}  // namespace detail

// The names the three files of Cache::Impl use unqualified (this header
// is theirs alone).
namespace fs = std::filesystem;
using detail::BlobStore;
using detail::CacheIndex;
using detail::IndexRow;
using detail::RowFilter;
using namespace detail;  // the helpers and counter names above
using text::Cat;

class Cache::Impl {
 public:
  explicit Impl(CacheOptions options) : opts_(std::move(options)), blobs_(opts_.dir), max_bytes_(opts_.max_bytes) {}

  ~Impl();
  absl::Status Open();
  absl::StatusOr<Entry> Lookup(std::string_view key_view, LookupCounting counting);
  void RecordUse(std::string_view key);
  void SetRemovalListener(Cache::RemovalListener listener);
  absl::StatusOr<bool> Contains(std::string_view key);
  absl::Status Publish(const EntryMeta& meta, std::string_view cubin, std::optional<Entry>* sealed);
  absl::StatusOr<EvictResult> Evict(const EvictFilter& f);
  absl::Status Pin(std::string_view key, bool pinned);
  absl::StatusOr<std::vector<EntryInfo>> List(const ListFilter& f);
  absl::Status ForEach(const ListFilter& f, const std::function<bool(const EntryInfo&)>& visit);
  absl::StatusOr<uint64_t> LargestInstantiation();
  absl::StatusOr<CacheStats> Stats();
  absl::StatusOr<VerifyReport> Verify(bool repair);
  absl::Status Maintain();
  void SetMaxBytes(uint64_t max);
  const std::filesystem::path& dir() const { return opts_.dir; }
  bool rebuilt() const { return rebuilt_; }

 private:
  uint64_t HighWatermark(uint64_t max) const;
  uint64_t LowWatermark(uint64_t max) const;

  absl::Status Miss(const std::string& key, bool counted);

  // Drops an entry whose blob is damaged, or (with `missing`) gone.
  // Returns whether it counted as corrupt. A blob gone because an eviction
  // removed it is not: the eviction deletes row and file inside one write
  // transaction, so by the time this Remove gets the write lock the row is
  // gone too, and nothing is counted, logged or reported.
  bool DropCorrupt(const std::string& key, const std::string& checksum, const std::filesystem::path& path,
                   std::string_view why, bool missing = false);
  void NotifyRemoved(const std::vector<std::string>& keys);

  // Deletes index rows in batches (bounding how long the write lock is
  // held), then their files. Returns the rows actually removed.
  absl::StatusOr<std::vector<IndexRow>> RemoveRows(const std::vector<IndexRow>& rows);
  absl::Status EvictToBudget();
  absl::Status FlushRecency();

 public:
  // Makes the index and the blob files agree: indexes valid blobs that have
  // no row (a writer killed between rename and insert), removes blobs that
  // are corrupt or lost a publish race, and (at open) drops rows whose blob
  // is gone. With `report`, records what it found.
  absl::Status Reconcile(VerifyReport* report, bool repair = true, bool drop_missing_rows = true);

 private:
  // Reconcile's steps (cache_reconcile.cpp): one blob file of its walk, an
  // intact orphan indexed, and (at open) the rows whose blob is gone
  // dropped; the number dropped.
  struct ReconcileWalk;
  void ReconcileBlob(ReconcileWalk& walk, const std::filesystem::path& path, std::string_view key,
                     std::string_view checksum);
  void AdoptOrphan(ReconcileWalk& walk, const std::filesystem::path& path, const std::string& key,
                   std::string_view checksum);
  absl::StatusOr<size_t> DropRowsWithoutBlobs(const ReconcileWalk& walk);

  void WakeBackground();
  void BackgroundLoop();

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
  // Held by a flush from taking the deltas until the index has them (or
  // they are put back), and by Stats() while it reads both: a counted
  // event is always in one of the two when Stats() looks, never in neither.
  std::mutex counters_mu_;

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

}  // namespace jitd::cache
