// The tiers a kernel is kept in, fastest first, and the rules that keep
// them in agreement: the manual of the tier contract.
//
//   memory (HotCache) -> disk (cache::Cache) -> bundles (cache::Bundle,
//   read-only, when mounted) -> remote (cache::RemoteTier)
//
// Every tier holds only verified entries under their content keys, and
// answers through one small interface (Tier). A TierStack composes them in
// order, as sccache's multilevel storage and ccache's local/remote split
// do, with two rules that make the tiers tell each other the truth:
//
//  1. A hit at any tier is recorded in every tier below it. A kernel
//     answered only from memory is in use on disk too: its hit count, last
//     use, `ls` order, budget eviction and `evict --older-than` see it.
//     Recording is cheap and batched off the hot path (the disk queues it
//     in memory and its background thread writes it).
//  2. A removal at any tier is forgotten in every tier above it. What the
//     disk evicts (budget or operator), drops as corrupt or repairs away is
//     not served from memory afterwards.
//
// A hit below fills the tiers above it (a disk hit goes to memory; a
// remote hit to disk, then memory), so the next request is answered higher.
// A tier that is itself a file on this host (a bundle) fills only the
// tiers that keep nothing across a restart (memory): copying it to disk
// would hold its bytes twice on one machine.
// A tier that fails (disk index unreadable, Redis down) misses: a tier
// never fails a request.
//
// Thread safety: every method of every tier may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "jitd/bundle.h"
#include "jitd/cache.h"
#include "remote/remote.h"
#include "serving/hot_cache.h"

namespace jitd::serving {

// Where an answer came from.
enum class Origin { kMemory, kDisk, kRemote, kCompiled, kNone, kBundle };
const char* OriginName(Origin origin);

class Tier {
 public:
  virtual ~Tier() = default;
  // What a hit here is reported as (kMemory, kDisk, kBundle, kRemote).
  virtual Origin origin() const = 0;
  // Whether what this tier holds outlives the daemon (disk, bundles).
  virtual bool durable() const { return true; }
  // Whether a hit here is copied into the durable tiers above it. A bundle
  // says no: it is a file on this host already.
  virtual bool copied_to_durable_tiers() const { return true; }
  // The verified entry for `key`, or null on a miss. A hit counts as a use
  // of this tier's entry. Gives up at `deadline` if the tier is slow
  // (remote); a tier that cannot answer misses.
  virtual std::shared_ptr<const cache::Entry> Lookup(const std::string& key,
                                                     std::chrono::steady_clock::time_point deadline) = 0;
  // Keeps `entry` (found below, or compiled). Returns the entry as this
  // tier holds it from now on (the disk's copy carries its blob path, for
  // PATH delivery), or `entry` itself when the tier could not keep it.
  // May block on I/O: never called on a hit's path for a tier below.
  virtual std::shared_ptr<const cache::Entry> Fill(std::shared_ptr<const cache::Entry> entry) = 0;
  // One use of `key` answered by a tier above. Cheap: queued, batched.
  virtual void RecordUse(const std::string& key) = 0;
  // Drops `keys`: a tier below removed them.
  virtual void Forget(const std::vector<std::string>& keys) = 0;
  // A tier that removes entries by itself (eviction, repair) reports their
  // keys to `removed` from then on; null stops it. The default removes
  // nothing by itself.
  using RemovalHandler = std::function<void(const std::vector<std::string>& keys)>;
  virtual void OnRemoved(RemovalHandler removed) { (void)removed; }
};

// The daemon's memory: HotCache, least recently used out first.
class MemoryTier final : public Tier {
 public:
  explicit MemoryTier(uint64_t max_bytes) : hot_(max_bytes) {}
  Origin origin() const override { return Origin::kMemory; }
  bool durable() const override { return false; }
  std::shared_ptr<const cache::Entry> Lookup(const std::string& key, std::chrono::steady_clock::time_point) override {
    return hot_.Get(key);
  }
  std::shared_ptr<const cache::Entry> Fill(std::shared_ptr<const cache::Entry> entry) override;
  void RecordUse(const std::string&) override {}  // nothing is above memory
  void Forget(const std::vector<std::string>& keys) override;
  HotCache::Stats stats() const { return hot_.stats(); }

 private:
  HotCache hot_;
};

// The disk cache. A Fill publishes the entry and reads it back verified; a
// disk that refuses it (full, read-only) leaves the entry served from
// memory, counted in store_failures and logged once per episode.
class DiskTier final : public Tier {
 public:
  explicit DiskTier(cache::Cache* cache) : cache_(cache) {}
  Origin origin() const override { return Origin::kDisk; }
  std::shared_ptr<const cache::Entry> Lookup(const std::string& key, std::chrono::steady_clock::time_point) override;
  std::shared_ptr<const cache::Entry> Fill(std::shared_ptr<const cache::Entry> entry) override;
  void RecordUse(const std::string& key) override { cache_->RecordUse(key); }
  void Forget(const std::vector<std::string>&) override {}  // the remote tier removes nothing the disk holds
  absl::Status Pin(const std::string& key) { return cache_->Pin(key, true); }
  // What cache::Cache reports through SetRemovalListener.
  void OnRemoved(RemovalHandler removed) override;
  uint64_t store_failures() const { return store_failures_.load(std::memory_order_relaxed); }

 private:
  cache::Cache* const cache_;
  std::atomic<uint64_t> store_failures_{0};
  // Failures in a row: the first is a warning, the rest are counted until
  // a store succeeds (a full disk fails every compile until room is made).
  std::atomic<uint64_t> failure_streak_{0};
};

// Sealed seed bundles, mounted read-only: asked in the order given, each
// entry read and verified again at each hit (Bundle::Find). Nothing is
// ever written or evicted here; a hit is counted (hits()), not recorded,
// and fills memory only. An entry that no longer verifies (the file was
// changed under the daemon) misses, is logged once and counted
// (corrupt()); the compile or the remote tier answers instead.
class BundleTier final : public Tier {
 public:
  // `bundles` must outlive the tier.
  explicit BundleTier(std::vector<const cache::Bundle*> bundles) : bundles_(std::move(bundles)) {}
  Origin origin() const override { return Origin::kBundle; }
  bool copied_to_durable_tiers() const override { return false; }
  std::shared_ptr<const cache::Entry> Lookup(const std::string& key, std::chrono::steady_clock::time_point) override;
  std::shared_ptr<const cache::Entry> Fill(std::shared_ptr<const cache::Entry> entry) override { return entry; }
  void RecordUse(const std::string&) override {}
  void Forget(const std::vector<std::string>&) override {}
  const std::vector<const cache::Bundle*>& bundles() const { return bundles_; }
  uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  uint64_t corrupt() const { return corrupt_.load(std::memory_order_relaxed); }

 private:
  const std::vector<const cache::Bundle*> bundles_;
  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> corrupt_{0};
};

// The fleet's shared tier. Lookup is a verified Fetch; Fill is the
// write-back. RecordUse is not sent: a read of Redis is what its LRU
// counts, and a use per memory hit would be a round trip per hit; a
// kernel hot in every daemon's memory may therefore age out of Redis,
// which costs a fresh daemon one compile, never a wrong answer.
class RemoteTierAdapter final : public Tier {
 public:
  explicit RemoteTierAdapter(cache::RemoteTier* remote) : remote_(remote) {}
  Origin origin() const override { return Origin::kRemote; }
  std::shared_ptr<const cache::Entry> Lookup(const std::string& key,
                                             std::chrono::steady_clock::time_point deadline) override;
  std::shared_ptr<const cache::Entry> Fill(std::shared_ptr<const cache::Entry> entry) override;
  void RecordUse(const std::string&) override {}
  void Forget(const std::vector<std::string>&) override {}
  cache::RemoteTier* remote() const { return remote_; }

 private:
  cache::RemoteTier* const remote_;
};

// Tiers in order, fastest first, composed by the two rules above.
class TierStack {
 public:
  // `tiers` must outlive the stack. Wires rule 2 for every tier that can
  // remove entries by itself (Tier::OnRemoved: the disk) until destroyed.
  explicit TierStack(std::vector<Tier*> tiers);
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
  // tier i is not copied_to_durable_tiers()).
  std::optional<Hit> Lookup(
      const std::string& key, size_t begin, size_t end,
      std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());
  // Fills tiers [from, to) bottom-up with `entry` (each fill gets what the
  // one below holds) and returns what tier `from` holds.
  std::shared_ptr<const cache::Entry> Fill(std::shared_ptr<const cache::Entry> entry, size_t from, size_t to);
  // Rule 2: tier `level` removed `keys`.
  void Removed(size_t level, const std::vector<std::string>& keys);

  size_t size() const { return tiers_.size(); }
  Tier& at(size_t level) const { return *tiers_[level]; }

 private:
  std::vector<Tier*> tiers_;
};

}  // namespace jitd::serving
