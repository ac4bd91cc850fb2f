// HotCache: the daemon's in-memory cache of verified entries, in front of
// the disk cache. Least recently used out first, bounded by the bytes of the
// cubins it holds. Thread-safe; a hit takes one mutex and moves one list
// node, and hands out a shared pointer, so no cubin is copied under the lock.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "jitd/cache.h"

namespace jitd::serving {

class HotCache {
 public:
  explicit HotCache(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  // The entry for `key`, made most recently used; nullptr on a miss.
  std::shared_ptr<const cache::Entry> Get(const std::string& key);
  // Inserts (or replaces) and evicts from the cold end down to the budget.
  // An entry larger than the whole budget is not kept.
  void Put(const std::string& key, std::shared_ptr<const cache::Entry> entry);
  void Erase(const std::string& key);
  void Clear();

  struct Stats {
    uint64_t entries = 0, bytes = 0, max_bytes = 0, hits = 0, misses = 0, evictions = 0;
  };
  Stats stats() const;

 private:
  using Item = std::pair<std::string, std::shared_ptr<const cache::Entry>>;
  static uint64_t Cost(const cache::Entry& e) { return e.cubin.size() + e.meta.log.size() + 256; }

  const uint64_t max_bytes_;
  mutable std::mutex mu_;
  std::list<Item> lru_;  // front = most recently used
  std::unordered_map<std::string, std::list<Item>::iterator> index_;
  uint64_t bytes_ = 0, hits_ = 0, misses_ = 0, evictions_ = 0;
};

}  // namespace jitd::serving
