// The levels a kernel is kept in, fastest first, and the rules that keep
// them in agreement: the manual of the tier contract. Each level is a
// cache::Storage (jitd/storage.h):
//
//   memory (MemoryTier, here) -> disk (cache::DiskStorage) -> bundles
//   (cache::BundleStorage, read-only, when mounted) -> remote
//   (cache::RemoteStorage)
//
// A TierStack composes them in order, as sccache's multilevel storage and
// ccache's local/remote split do, with two rules that make the levels tell
// each other the truth:
//
//  1. A hit at any level is recorded in every level below it. A kernel
//     answered only from memory is in use on disk too: its hit count, last
//     use, `ls` order, budget eviction and `evict --older-than` see it.
//     Recording is cheap and batched off the hot path (the disk queues it
//     in memory and its background thread writes it).
//  2. A removal at any level is forgotten in every level above it. What the
//     disk evicts (budget or operator), drops as corrupt or repairs away is
//     not served from memory afterwards.
//
// A hit below fills the levels above it (a disk hit goes to memory; a
// remote hit to disk, then memory), so the next request is answered higher.
// A level that is itself a file on this host (a bundle) fills only the
// levels that keep nothing across a restart (memory): copying it to disk
// would hold its bytes twice on one machine.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "jitd/cache.h"
#include "jitd/storage.h"
#include "serving/hot_cache.h"

namespace jitd::serving {

// Where an answer came from: a storage level, a compile, or nowhere.
enum class Origin { kMemory, kDisk, kRemote, kCompiled, kNone, kBundle };
const char* OriginName(Origin origin);
Origin OriginOf(cache::Level level);

// The daemon's memory: HotCache, least recently used out first.
class MemoryTier final : public cache::Storage {
 public:
  explicit MemoryTier(uint64_t max_bytes) : hot_(max_bytes) {}
  cache::Level level() const override { return cache::Level::kMemory; }
  bool durable() const override { return false; }
  std::shared_ptr<const cache::Entry> Fill(std::shared_ptr<const cache::Entry> entry) override;
  void RecordUse(const std::string&) override {}  // nothing is above memory
  void Forget(const std::vector<std::string>& keys) override;
  HotCache::Stats hot_stats() const { return hot_.stats(); }

 protected:
  std::shared_ptr<const cache::Entry> Find(const std::string& key, std::chrono::steady_clock::time_point) override {
    return hot_.Get(key);
  }

 private:
  HotCache hot_;
};

// Tiers in order, fastest first, composed by the two rules above.
class TierStack {
 public:
  // `tiers` must outlive the stack. Wires rule 2 for every tier that can
  // remove entries by itself (Storage::OnRemoved: the disk) until destroyed.
  explicit TierStack(std::vector<cache::Storage*> tiers);
  ~TierStack();
  TierStack(const TierStack&) = delete;
  TierStack& operator=(const TierStack&) = delete;

  struct Hit {
    std::shared_ptr<const cache::Entry> entry;
    Origin origin = Origin::kNone;
  };
  // Asks tiers [begin, end) in order. On a hit at tier i: a use is
  // recorded in every tier below i (all of them, not only those asked) and
  // the entry fills every tier above i (the non-durable ones only, when
  // tier i is not copied_to_durable_levels()).
  std::optional<Hit> Lookup(
      const std::string& key, size_t begin, size_t end,
      std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());
  // Fills tiers [from, to) bottom-up with `entry` (each fill gets what the
  // one below holds) and returns what tier `from` holds.
  std::shared_ptr<const cache::Entry> Fill(std::shared_ptr<const cache::Entry> entry, size_t from, size_t to);
  // Rule 2: tier `level` removed `keys`.
  void Removed(size_t level, const std::vector<std::string>& keys);

  size_t size() const { return tiers_.size(); }
  cache::Storage& at(size_t level) const { return *tiers_[level]; }

 private:
  std::vector<cache::Storage*> tiers_;
};

}  // namespace jitd::serving
