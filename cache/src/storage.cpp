#include "jitd/storage.h"

#include <spdlog/spdlog.h>

namespace jitd::cache {
namespace {

std::string Short(const std::string& key) { return key.substr(0, 12); }

}  // namespace

const char* LevelName(Level level) {
  switch (level) {
    case Level::kMemory:
      return "memory";
    case Level::kDisk:
      return "disk";
    case Level::kBundle:
      return "bundle";
    case Level::kRemote:
      return "remote";
    case Level::kDirectory:
      return "directory";
  }
  return "unknown";
}

std::shared_ptr<const Entry> Storage::Lookup(const std::string& key, std::chrono::steady_clock::time_point deadline) {
  std::shared_ptr<const Entry> entry = Find(key, deadline);
  (entry != nullptr ? hits_ : misses_).fetch_add(1, std::memory_order_relaxed);
  return entry;
}

StorageStats Storage::stats() const {
  StorageStats s;
  s.hits = hits_.load(std::memory_order_relaxed);
  s.misses = misses_.load(std::memory_order_relaxed);
  s.fills = fills_.load(std::memory_order_relaxed);
  s.fill_failures = fill_failures_.load(std::memory_order_relaxed);
  s.corrupt = corrupt_.load(std::memory_order_relaxed);
  return s;
}

void Storage::CountFill(bool kept) { (kept ? fills_ : fill_failures_).fetch_add(1, std::memory_order_relaxed); }

uint64_t Storage::CountCorrupt() { return corrupt_.fetch_add(1, std::memory_order_relaxed); }

std::shared_ptr<const Entry> DiskStorage::Find(const std::string& key, std::chrono::steady_clock::time_point) {
  absl::StatusOr<Entry> found = cache_->Lookup(key);
  if (found.ok()) return std::make_shared<const Entry>(*std::move(found));
  if (!absl::IsNotFound(found.status())) {
    // The index could not be read: a miss, logged.
    spdlog::warn("disk cache lookup of {} failed: {}", Short(key), found.status().ToString());
  }
  return nullptr;
}

std::shared_ptr<const Entry> DiskStorage::Fill(std::shared_ptr<const Entry> entry) {
  std::optional<Entry> sealed;
  absl::Status stored = cache_->Publish(entry->meta, entry->cubin, &sealed);
  if (stored.ok()) {
    // What was just written is what is served: its path and checksum come
    // from the write, so it is not read back. Only a key another writer
    // stored first is read (verified, with its path for PATH delivery);
    // not a use: nobody asked for it twice.
    absl::StatusOr<Entry> kept = sealed.has_value() ? absl::StatusOr<Entry>(*std::move(sealed))
                                                    : cache_->Lookup(entry->meta.key, LookupCounting::kUncounted);
    if (sealed.has_value()) kept->cubin = entry->cubin;
    if (kept.ok()) {
      if (uint64_t streak = failure_streak_.exchange(0); streak > 0) {
        spdlog::info("storing compiled kernels works again, after {} that could not be stored", streak);
      }
      CountFill(true);
      return std::make_shared<const Entry>(*std::move(kept));
    }
    // Evicted between publish and read-back by a tiny budget, or the index
    // failed: the compiled bytes are served as they are.
    stored = kept.status();
  }
  CountFill(false);
  // Once per episode: a full disk fails every compile until room is made.
  if (failure_streak_.fetch_add(1) == 0) {
    spdlog::warn(
        "compiled {} ({}) but could not store it: {}; serving it from memory. Until a store succeeds, further "
        "failures are only counted (Stats: store_failures)",
        entry->meta.kernel, Short(entry->meta.key), stored.ToString());
  } else {
    spdlog::debug("compiled {} ({}) but could not store it: {}", entry->meta.kernel, Short(entry->meta.key),
                  stored.ToString());
  }
  return entry;
}

void DiskStorage::OnRemoved(RemovalHandler removed) { cache_->SetRemovalListener(std::move(removed)); }

}  // namespace jitd::cache
