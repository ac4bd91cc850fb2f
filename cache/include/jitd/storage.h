// cache::Storage: the one interface every place a kernel is kept answers
// through, fastest first:
//
//   memory (the daemon's HotCache) -> disk (DiskStorage over Cache) ->
//   bundles (BundleStorage, jitd/bundle_storage.h, read-only) -> remote
//   (RemoteStorage, remote/remote_storage.h)
//
// and, outside the daemon, a warmed directory read without writing
// (ReadOnlyDirectory, jitd/read_only_directory.h), which the client's
// fallback reads. The daemon composes the levels (serving::TierStack, the
// manual of the rules that keep them in agreement), as sccache's
// multilevel storage does.
//
// Every level holds only verified entries under their content keys; a level
// that fails (an unreadable index, Redis down) misses: a level never fails
// a request. Every level counts the same statistics (StorageStats), so
// that each is reported the same way.
//
// Thread safety: every method of every level may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "jitd/cache.h"

namespace jitd::cache {

// Which level an entry was found at.
enum class Level { kMemory, kDisk, kBundle, kRemote, kDirectory };
const char* LevelName(Level level);

// A level's counts since it was made.
struct StorageStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  // Entries kept here (found below, or compiled), and those it could not
  // keep (a full disk, a read-only directory).
  uint64_t fills = 0;
  uint64_t fill_failures = 0;
  // Entries that no longer verified: never served, counted.
  uint64_t corrupt = 0;
};

class Storage {
 public:
  virtual ~Storage() = default;
  virtual Level level() const = 0;
  // Whether what this level holds outlives the daemon (disk, bundles).
  virtual bool durable() const { return true; }
  // Whether a hit here is copied into the durable levels above it. A bundle
  // says no: it is a file on this host already.
  virtual bool copied_to_durable_levels() const { return true; }
  // The verified entry for `key`, or null on a miss. A hit counts as a use
  // of this level's entry. Gives up at `deadline` if the level is slow
  // (remote); a level that cannot answer misses. Counts a hit or a miss.
  std::shared_ptr<const Entry> Lookup(const std::string& key, std::chrono::steady_clock::time_point deadline);
  // Keeps `entry` (found below, or compiled). Returns the entry as this
  // level holds it from now on (the disk's copy carries its blob path, for
  // PATH delivery), or `entry` itself when the level could not keep it.
  // May block on I/O: never called on a hit's path for a level below.
  virtual std::shared_ptr<const Entry> Fill(std::shared_ptr<const Entry> entry) = 0;
  // One use of `key` answered by a level above. Cheap: queued, batched.
  virtual void RecordUse(const std::string& key) = 0;
  // Drops `keys`: a level below removed them.
  virtual void Forget(const std::vector<std::string>& keys) = 0;
  // A level that removes entries by itself (eviction, repair) reports their
  // keys to `removed` from then on; null stops it. The default removes
  // nothing by itself.
  using RemovalHandler = std::function<void(const std::vector<std::string>& keys)>;
  virtual void OnRemoved(RemovalHandler removed) { (void)removed; }

  StorageStats stats() const;

 protected:
  // What Lookup asks: the entry or null, without counting hits and misses.
  virtual std::shared_ptr<const Entry> Find(const std::string& key, std::chrono::steady_clock::time_point deadline) = 0;
  void CountFill(bool kept);
  // Returns the corrupt count before this one (0: the first, to log).
  uint64_t CountCorrupt();

 private:
  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> misses_{0};
  std::atomic<uint64_t> fills_{0};
  std::atomic<uint64_t> fill_failures_{0};
  std::atomic<uint64_t> corrupt_{0};
};

// The disk cache. A Fill publishes the entry and reads it back verified; a
// disk that refuses it (full, read-only) leaves the entry served from
// memory, counted in fill_failures and logged once per episode.
class DiskStorage final : public Storage {
 public:
  // `cache` must outlive this.
  explicit DiskStorage(Cache* cache) : cache_(cache) {}
  Level level() const override { return Level::kDisk; }
  std::shared_ptr<const Entry> Fill(std::shared_ptr<const Entry> entry) override;
  void RecordUse(const std::string& key) override { cache_->RecordUse(key); }
  void Forget(const std::vector<std::string>&) override {}  // nothing above removes what the disk holds
  absl::Status Pin(const std::string& key) { return cache_->Pin(key, true); }
  // What Cache reports through SetRemovalListener.
  void OnRemoved(RemovalHandler removed) override;

 protected:
  std::shared_ptr<const Entry> Find(const std::string& key, std::chrono::steady_clock::time_point) override;

 private:
  Cache* const cache_;
  // Failures in a row: the first is a warning, the rest are counted until
  // a store succeeds (a full disk fails every compile until room is made).
  std::atomic<uint64_t> failure_streak_{0};
};

}  // namespace jitd::cache
