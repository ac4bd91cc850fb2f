// CacheIndex: the SQLite index of a cache directory's blobs.
//
// One row per entry (key, blob checksum, size, recency, hits, pin). Totals
// (entries, bytes, pinned) live in a one-row table kept by triggers, so they
// are exact across processes and cost O(1) to read. Cumulative counters
// (hits, misses, ...) live in a table that the recency flush adds to.
//
// Connections: one writer (serialised by a mutex; SQLite serialises writers
// across processes with busy_timeout) and a pool of readers for the hit
// path. WAL mode with synchronous=NORMAL: commits do not fsync, and
// wal_autocheckpoint is off so that only Checkpoint() (the background
// thread) ever checkpoints.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "jitd/detail/sqlite.h"

namespace jitd::cache::detail {

// The schema this code writes; Open() migrates older indexes up to it.
inline constexpr int kSchemaVersion = 3;

struct IndexRow {
  std::string key;
  std::string checksum;
  std::string kernel;
  std::string params;
  std::string arch;
  uint64_t size = 0;
  std::string nvrtc_version;
  double compile_ms = 0;
  int64_t created_ms = 0;
  int64_t last_used_ms = 0;
  uint64_t hits = 0;
  bool pinned = false;
  std::string options;  // EntryMeta::request_options, space-separated
};

struct Totals {
  uint64_t entries = 0, bytes = 0, pinned_entries = 0, pinned_bytes = 0;
};

struct RecencyUpdate {
  std::string key;
  int64_t last_used_ms = 0;
  uint64_t hits = 0;
};

// A WHERE clause over entries, built from typed filters only (never from
// caller-supplied SQL).
struct RowFilter {
  std::vector<std::string> keys;
  std::string kernel_glob;
  std::string arch;
  std::optional<std::string> params;   // exact; "" matches rows without params
  std::optional<std::string> options;  // exact; "" matches rows without request options
  std::optional<int64_t> last_used_before_ms;
  bool unpinned_only = false;
};

class CacheIndex {
 public:
  // Opens or creates the index at `path` and migrates it to kSchemaVersion.
  // DATA_LOSS means the file is not a readable SQLite database.
  static absl::StatusOr<std::unique_ptr<CacheIndex>> Open(const std::filesystem::path& path, bool read_only);
  ~CacheIndex();

  // The row's checksum and size, or nullopt. Uses a pooled reader.
  absl::StatusOr<std::optional<IndexRow>> Find(const std::string& key);

  // Inserts unless the key exists. Returns the checksum that is now stored
  // for the key (ours if inserted, the earlier writer's otherwise).
  // With `still_valid`, it is asked inside the write transaction, after the
  // key was found absent and before the insert; false inserts nothing and
  // returns "". Recovery uses it to adopt a blob only if the file still
  // exists while no other writer can run: an eviction deletes its files
  // inside its own transaction (see Remove), so a blob seen here is not one
  // an eviction has already decided to delete.
  absl::StatusOr<std::string> InsertIfAbsent(const IndexRow& row, const std::function<bool()>& still_valid = {});

  // Removes the rows whose (key, checksum) match, in one transaction;
  // returns which were removed (a row changed by another process is kept).
  // `on_removed(i)` runs inside the transaction for every row removed: the
  // caller deletes the row's blob there, so no other process ever sees a
  // blob without its row that is about to vanish, nor a row whose blob is
  // gone (readers in WAL mode see the rows until the commit; a reader that
  // finds the file missing meanwhile waits on this lock in Remove and then
  // finds the row gone: not corrupt).
  absl::StatusOr<std::vector<bool>> Remove(const std::vector<std::pair<std::string, std::string>>& rows,
                                           const std::function<void(size_t)>& on_removed = {});

  // Find(), read on the writer after taking the write lock: it sees every
  // change committed before, and none is in progress in any process.
  absl::StatusOr<std::optional<IndexRow>> FindSerialized(const std::string& key);

  // Matching rows, ordered by last use (oldest first, or newest first).
  absl::StatusOr<std::vector<IndexRow>> Select(const RowFilter& filter, bool newest_first, size_t limit);
  // Select's rows handed to `visit` one at a time, as they are read: memory
  // stays one row's whatever the index holds. `visit` returns false to
  // stop. It runs on a pooled reader and must not call back into the index.
  absl::Status Visit(const RowFilter& filter, bool newest_first, size_t limit,
                     const std::function<bool(const IndexRow&)>& visit);
  // The most rows one instantiation (kernel, params, arch, options) has.
  absl::StatusOr<uint64_t> LargestInstantiation();
  absl::StatusOr<uint64_t> Count(const RowFilter& filter);

  // Adds recency and counter deltas in one transaction.
  absl::Status Apply(const std::vector<RecencyUpdate>& updates, const std::map<std::string, uint64_t>& counters);

  absl::StatusOr<bool> SetPinned(const std::string& key, bool pinned);
  absl::StatusOr<Totals> GetTotals();
  absl::StatusOr<std::map<std::string, uint64_t>> Counters();
  // The (key, checksum) pairs of the keys that start with `prefix`, for
  // reconciling one shard of blob files.
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> KeysWithPrefix(const std::string& prefix);

  // PASSIVE checkpoint, or TRUNCATE when the WAL has grown large.
  absl::Status Checkpoint();
  // SQLite's quick_check: "ok" or its findings.
  absl::StatusOr<std::string> IntegrityCheck();

  int opened_at_version() const { return opened_at_version_; }

 private:
  struct Reader;
  CacheIndex(std::string uri, int flags, Database writer);
  absl::Status Migrate();
  absl::StatusOr<std::unique_ptr<Reader>> AcquireReader();
  // The columns ReadRow reads, and the options column, for schema_version_.
  const char* Columns() const;
  const char* OptionsColumn() const;
  const char* ParamsColumn() const;
  void ReleaseReader(std::unique_ptr<Reader> reader);
  // Runs `body` inside BEGIN IMMEDIATE ... COMMIT on the writer.
  template <typename F>
  absl::Status WriteTransaction(F&& body);

  std::string uri_;
  int flags_;
  int opened_at_version_ = 0;
  // The file's schema now: kSchemaVersion once migrated; a read-only open
  // may find an older one it reads as it is.
  int schema_version_ = kSchemaVersion;
  std::mutex write_mu_;  // guards writer_
  Database writer_;
  std::mutex readers_mu_;
  std::vector<std::unique_ptr<Reader>> readers_;
};

// Connection settings every connection gets (busy timeout, WAL tuning).
absl::Status ConfigureConnection(Database& db, bool read_only);

}  // namespace jitd::cache::detail
