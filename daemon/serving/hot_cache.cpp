#include "serving/hot_cache.h"

namespace jitd::serving {

std::shared_ptr<const cache::Entry> HotCache::Get(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++misses_;
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  ++hits_;
  return it->second->second;
}

void HotCache::Put(const std::string& key, std::shared_ptr<const cache::Entry> entry) {
  const uint64_t cost = Cost(*entry);
  std::lock_guard lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    bytes_ -= Cost(*it->second->second);
    lru_.erase(it->second);
    index_.erase(it);
  }
  if (cost > max_bytes_) return;
  lru_.emplace_front(key, std::move(entry));
  index_[key] = lru_.begin();
  bytes_ += cost;
  while (bytes_ > max_bytes_ && !lru_.empty()) {
    bytes_ -= Cost(*lru_.back().second);
    index_.erase(lru_.back().first);
    lru_.pop_back();
    ++evictions_;
  }
}

void HotCache::Erase(const std::string& key) {
  std::lock_guard lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    bytes_ -= Cost(*it->second->second);
    lru_.erase(it->second);
    index_.erase(it);
  }
}

void HotCache::Clear() {
  std::lock_guard lock(mu_);
  lru_.clear();
  index_.clear();
  bytes_ = 0;
}

HotCache::Stats HotCache::stats() const {
  std::lock_guard lock(mu_);
  return {index_.size(), bytes_, max_bytes_, hits_, misses_, evictions_};
}

}  // namespace jitd::serving
