// jitd's cubin cache: the one public header of the `jitd_cache` library.
//
// A cache directory holds one immutable blob file per entry (the cubin plus
// everything needed to use it: lowered symbol names, arch, options, NVRTC
// version, compile log) and a SQLite index of those files:
//
//   DIR/index.sqlite            the index (WAL mode), schema in cache_index.cpp
//   DIR/blobs/KK/KEY-CHECKSUM   blob files, KK = the key's first two hex digits
//   DIR/tmp/                    files being written; swept at open
//
// Guarantees:
//  * A blob is published atomically (temp file, fsync, rename, then the index
//    row), and is never modified after. Readers never see a partial blob.
//  * Every read verifies the blob's XXH3-128 checksum against the one stored
//    at publish. A mismatch (or a truncated or missing blob) is a miss: the
//    entry is dropped, counted in Stats().corrupt, logged, and never served.
//  * The hit path reads only: recency and hit counts are queued in memory and
//    written in batches by a background thread, which also checkpoints the
//    WAL. No fsync and no checkpoint happens on a hit.
//  * With a byte budget, a background thread evicts least-recently-used,
//    unpinned entries in bounded batches once the cache passes its high
//    watermark, down to its low watermark. Pinned entries are never evicted.
//  * Several processes may use one directory at once (a daemon and an
//    offline warm-up writer): SQLite serialises index writes, blob names
//    carry their checksum so two writers never overwrite each other's file,
//    and the first publish of a key wins.
//  * Open() recovers: it sweeps temp files left by killed writers, rebuilds
//    an unreadable index from the blob files (which describe themselves),
//    and schedules a reconcile of rows without blobs and blobs without rows.
//
// Thread safety: every method of Cache may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "jitd/blob.h"

namespace jitd::cache {

// A verified entry as Lookup() returns it.
struct Entry {
  EntryMeta meta;
  std::string cubin;
  std::filesystem::path blob_path;  // the immutable file it was read from
  std::string checksum;             // hex XXH3-128 of the blob file
};

// An index row, as listing and eviction report it (no blob read).
struct EntryInfo {
  std::string key;
  std::string kernel;
  std::string params;
  std::string arch;
  uint64_t size_bytes = 0;  // blob file size
  int64_t created_unix_ms = 0;
  int64_t last_used_unix_ms = 0;
  uint64_t hits = 0;
  bool pinned = false;
  std::string nvrtc_version;
  double compile_ms = 0;
  // The request's extra options (EntryMeta::request_options); empty for
  // none, and for entries indexed before jitd recorded them (index
  // schema 3).
  std::vector<std::string> options{};
};

// Whether a Lookup counts in Stats (hits, misses) and recency. Reading back
// what the caller has just published is not a use of the entry.
enum class LookupCounting { kCounted, kUncounted };

struct CacheOptions {
  std::filesystem::path dir;
  // Byte budget over blob files; 0 = unbounded.
  uint64_t max_bytes = 0;
  // Eviction starts when the cache passes high_watermark * max_bytes and
  // removes LRU entries down to low_watermark * max_bytes, so that one
  // eviction pass makes room for many publishes instead of one each.
  double high_watermark = 0.95;
  double low_watermark = 0.85;
  // Rows deleted per index transaction while evicting: bounds how long an
  // eviction holds SQLite's write lock (about 1 ms per 256 rows here).
  size_t evict_batch = 256;
  // How often queued recency updates are written and the WAL checkpointed.
  std::chrono::milliseconds flush_interval{500};
  // Read-only: no writes of any kind (no recency, no drops, no recovery);
  // corrupt entries are still never served. For clients reading a warmed
  // cache directly while the daemon is away.
  bool read_only = false;
  // Run the background thread (recency flush, checkpoint, budget eviction,
  // reconcile). Without it, Flush() does the same work on the caller's
  // thread; tests use that to be deterministic.
  bool background = true;
  // Files in tmp/ and unindexed blobs younger than this are left alone by
  // recovery: another process may be about to rename or index them.
  std::chrono::seconds orphan_grace{60};
  // fsync each blob and its directory before indexing it, so that a power
  // loss never leaves an index row naming an empty file. Bulk writers that
  // sync once at the end (image builds, benchmarks) may turn it off.
  bool sync_writes = true;
};

// Filters for Evict(); they combine with AND. At least one must be set.
struct EvictFilter {
  std::vector<std::string> keys{};                   // exact keys
  std::string kernel_glob{};                         // SQLite GLOB over kernel names
  std::string arch{};                                // exact arch
  std::optional<std::chrono::seconds> older_than{};  // last use before now-d
  // Evict matching entries, least recently used first, until the whole cache
  // holds at most this many bytes.
  std::optional<uint64_t> max_bytes{};
  bool dry_run = false;
  // Pinned entries match too (else they are never evicted).
  bool include_pinned = false;
};

struct EvictResult {
  std::vector<EntryInfo> evicted;  // in eviction order
  uint64_t evicted_bytes = 0;
  bool dry_run = false;
  uint64_t remaining_entries = 0;
  uint64_t remaining_bytes = 0;
};

// Filters for List(); they combine with AND, and an unset one matches all.
struct ListFilter {
  std::string kernel_glob{};  // SQLite GLOB over kernel names
  std::string arch{};         // exact arch
  // Exact canonical params, as EntryMeta::params holds them ("k=v,k=v");
  // "" selects kernels without params, nullopt any params.
  std::optional<std::string> params{};
  // Exact request options, space-separated in order; "" selects entries
  // compiled without extra options, nullopt any.
  std::optional<std::string> options{};
  size_t limit = 0;  // 0 = all
};

struct CacheStats {
  uint64_t entries = 0;
  uint64_t bytes = 0;
  uint64_t pinned_entries = 0;
  uint64_t pinned_bytes = 0;
  uint64_t max_bytes = 0;
  uint64_t high_watermark_bytes = 0;
  uint64_t low_watermark_bytes = 0;
  // Cumulative over the directory's life and every process that used it
  // (this process's part may trail by one flush interval).
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;
  uint64_t corrupt = 0;
  uint64_t publishes = 0;
  uint64_t publish_failures = 0;
};

struct VerifyReport {
  uint64_t checked = 0;
  uint64_t ok = 0;
  uint64_t corrupt = 0;
  uint64_t missing_blobs = 0;
  uint64_t orphan_blobs = 0;
  uint64_t repaired = 0;
  std::vector<std::string> problems;
  std::string index_integrity;  // "ok" or SQLite's findings
};

class Cache {
 public:
  // Opens (creating if needed) the cache directory. Fails with
  // FAILED_PRECONDITION when the directory cannot be created or written, or
  // when a read-only open finds no index.
  static absl::StatusOr<std::unique_ptr<Cache>> Open(const CacheOptions& options);

  // Flushes queued recency and stops the background thread.
  ~Cache();
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  // The verified entry for `key`, NOT_FOUND on a miss (including a corrupt
  // entry, which is dropped). Other errors mean the index could not be read.
  absl::StatusOr<Entry> Lookup(std::string_view key, LookupCounting counting = LookupCounting::kCounted);

  // Whether an index row exists for `key`; reads no blob, counts nothing.
  absl::StatusOr<bool> Contains(std::string_view key);

  // Records one use of `key` served by a tier above this cache (the
  // daemon's memory): a hit in Stats() and, for the entry, one more hit and
  // a fresh last use, exactly as a counted Lookup would. Costs one map
  // update in memory; the background flush writes it with the others, so
  // `ls` order, hit counts, budget eviction and `evict --older-than` see
  // entries that are only ever answered from memory as in use. A key with
  // no row is ignored at the flush. No-op when read-only.
  void RecordUse(std::string_view key);

  // Called with the keys of entries this cache removed: evicted (budget or
  // Evict()), dropped as corrupt or missing, or found gone by a repair; so
  // that a tier above (the daemon's memory) forgets them too. Runs on the
  // thread that removed them, after the removal, with no lock of the
  // cache's held; it must be cheap and must not call back into the cache.
  // Set it before the cache is shared between threads.
  using RemovalListener = std::function<void(const std::vector<std::string>& keys)>;
  void SetRemovalListener(RemovalListener listener);

  // Stores a cubin under meta.key. Returns OK if the key is already present
  // (first publish wins; the content of a key never changes). Fails with
  // INVALID_ARGUMENT for a malformed key and RESOURCE_EXHAUSTED when the
  // disk is full; nothing partial is ever left visible.
  //
  // `sealed` (optional) gets the entry as this call stored it (its meta
  // with the creation time, the blob's path and checksum; no cubin): what
  // a Lookup would return, without reading the blob back. Left empty when
  // the key was already present, whose blob is another writer's.
  absl::Status Publish(const EntryMeta& meta, std::string_view cubin, std::optional<Entry>* sealed = nullptr);

  // Removes what the filter selects (or only reports it, with dry_run).
  // INVALID_ARGUMENT when no filter is set.
  absl::StatusOr<EvictResult> Evict(const EvictFilter& filter);

  // Pins or unpins an entry; NOT_FOUND for an unknown key.
  absl::Status Pin(std::string_view key, bool pinned);

  // Index rows, most recently used first.
  absl::StatusOr<std::vector<EntryInfo>> List(const ListFilter& filter);
  // List's rows handed to `visit` one at a time as the index is read, so
  // that a walk over 100k entries holds one in memory; `visit` returns
  // false to stop, and must not call back into this cache.
  absl::Status ForEach(const ListFilter& filter, const std::function<bool(const EntryInfo&)>& visit);
  // The most entries one instantiation (kernel, params, arch, options) has:
  // 2 or more when older generations of it are kept beside the newest.
  absl::StatusOr<uint64_t> LargestInstantiation();

  absl::StatusOr<CacheStats> Stats();

  // Reads every blob and checks it; with `repair`, drops corrupt entries,
  // removes rows without blobs and indexes or removes blobs without rows.
  // Safe beside eviction in this and other processes: an entry evicted
  // while it is checked is neither reported nor "repaired", and a blob
  // being deleted by an eviction is never indexed again (see Remove in
  // cache_index.h for why).
  absl::StatusOr<VerifyReport> Verify(bool repair);

  // Writes queued recency and counters, runs budget eviction and a WAL
  // checkpoint now, on the calling thread.
  absl::Status Flush();

  // Changes the byte budget at run time (0 = unbounded); the background
  // thread applies it at once.
  void SetMaxBytes(uint64_t max_bytes);

  const std::filesystem::path& dir() const;

  // Whether Open() found the index unreadable and rebuilt it from blobs.
  bool rebuilt_index() const;

  class Impl;

 private:
  explicit Cache(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// What a cache directory holds is its user's alone (docs/SECURITY.md):
// directories the cache makes get mode 0700, its files (blobs, the index and
// its journal, memos, locks) 0600. A directory that already exists keeps its
// mode: an operator who shares one on purpose chmods it.
inline constexpr unsigned kPrivateDirMode = 0700;
inline constexpr unsigned kPrivateFileMode = 0600;
// (Directories are made with jitd/base/files.h's MakePrivateDirs: 0700.)

}  // namespace jitd::cache
