#include "serving/tier.h"

#include <spdlog/spdlog.h>

namespace jitd::serving {
namespace {

std::string Short(const std::string& key) { return key.substr(0, 12); }

}  // namespace

const char* OriginName(Origin origin) {
  switch (origin) {
    case Origin::kMemory:
      return "memory";
    case Origin::kDisk:
      return "disk";
    case Origin::kRemote:
      return "remote";
    case Origin::kCompiled:
      return "compiled";
    case Origin::kNone:
      return "none";
    case Origin::kBundle:
      return "bundle";
  }
  return "none";
}

std::shared_ptr<const cache::Entry> MemoryTier::Fill(std::shared_ptr<const cache::Entry> entry) {
  hot_.Put(entry->meta.key, entry);
  return entry;
}

void MemoryTier::Forget(const std::vector<std::string>& keys) {
  for (const auto& key : keys) hot_.Erase(key);
}

std::shared_ptr<const cache::Entry> DiskTier::Lookup(const std::string& key, std::chrono::steady_clock::time_point) {
  absl::StatusOr<cache::Entry> found = cache_->Lookup(key);
  if (found.ok()) return std::make_shared<const cache::Entry>(*std::move(found));
  if (!absl::IsNotFound(found.status())) {
    // The index could not be read: a miss, logged.
    spdlog::warn("disk cache lookup of {} failed: {}", Short(key), found.status().ToString());
  }
  return nullptr;
}

std::shared_ptr<const cache::Entry> DiskTier::Fill(std::shared_ptr<const cache::Entry> entry) {
  absl::Status stored = cache_->Publish(entry->meta, entry->cubin);
  if (stored.ok()) {
    // Read back what is on disk (verified, with its path for PATH
    // delivery); not a use: nobody asked for it twice.
    absl::StatusOr<cache::Entry> back = cache_->Lookup(entry->meta.key, cache::LookupCounting::kUncounted);
    if (back.ok()) {
      if (uint64_t streak = failure_streak_.exchange(0); streak > 0) {
        spdlog::info("storing compiled kernels works again, after {} that could not be stored", streak);
      }
      return std::make_shared<const cache::Entry>(*std::move(back));
    }
    // Evicted between publish and read-back by a tiny budget, or the index
    // failed: the compiled bytes are served as they are.
    stored = back.status();
  }
  store_failures_.fetch_add(1, std::memory_order_relaxed);
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

void DiskTier::OnRemoved(RemovalHandler removed) { cache_->SetRemovalListener(std::move(removed)); }

std::shared_ptr<const cache::Entry> BundleTier::Lookup(const std::string& key, std::chrono::steady_clock::time_point) {
  for (const cache::Bundle* bundle : bundles_) {
    absl::StatusOr<cache::Entry> found = bundle->Find(key);
    if (found.ok()) {
      hits_.fetch_add(1, std::memory_order_relaxed);
      return std::make_shared<const cache::Entry>(*std::move(found));
    }
    if (absl::IsNotFound(found.status())) continue;
    // Verified whole at mount: the file changed since. Never served; the
    // first time per daemon is a warning, the rest are counted.
    if (corrupt_.fetch_add(1, std::memory_order_relaxed) == 0) {
      spdlog::error(
          "bundle {} no longer verifies: {}; its entries miss until the daemon is restarted with a good "
          "copy (further failures are only counted: Stats bundle_corrupt)",
          bundle->path().string(), found.status().ToString());
    }
  }
  return nullptr;
}

std::shared_ptr<const cache::Entry> RemoteTierAdapter::Lookup(const std::string& key,
                                                              std::chrono::steady_clock::time_point deadline) {
  cache::RemoteFetch fetched = remote_->Fetch(key, deadline);
  if (fetched.kind != cache::RemoteFetch::Kind::kHit) return nullptr;
  auto entry = std::make_shared<cache::Entry>();
  entry->meta = std::move(fetched.meta);
  entry->cubin = std::move(fetched.cubin);
  entry->checksum = cache::Checksum128(entry->cubin);
  return entry;
}

std::shared_ptr<const cache::Entry> RemoteTierAdapter::Fill(std::shared_ptr<const cache::Entry> entry) {
  remote_->Store(entry->meta, entry->cubin);
  return entry;
}

TierStack::TierStack(std::vector<Tier*> tiers) : tiers_(std::move(tiers)) {
  for (size_t level = 0; level < tiers_.size(); ++level) {
    tiers_[level]->OnRemoved([this, level](const std::vector<std::string>& keys) { Removed(level, keys); });
  }
}

TierStack::~TierStack() {
  for (Tier* tier : tiers_) tier->OnRemoved(nullptr);
}

std::optional<TierStack::Hit> TierStack::Lookup(const std::string& key, size_t begin, size_t end,
                                                std::chrono::steady_clock::time_point deadline) {
  end = std::min(end, tiers_.size());
  for (size_t level = begin; level < end; ++level) {
    std::shared_ptr<const cache::Entry> entry = tiers_[level]->Lookup(key, deadline);
    if (entry == nullptr) continue;
    for (size_t below = level + 1; below < tiers_.size(); ++below) tiers_[below]->RecordUse(key);
    const bool to_durable = tiers_[level]->copied_to_durable_tiers();
    for (size_t above = level; above-- > 0;) {
      if (to_durable || !tiers_[above]->durable()) entry = tiers_[above]->Fill(std::move(entry));
    }
    return Hit{std::move(entry), tiers_[level]->origin()};
  }
  return std::nullopt;
}

std::shared_ptr<const cache::Entry> TierStack::Fill(std::shared_ptr<const cache::Entry> entry, size_t from, size_t to) {
  to = std::min(to, tiers_.size());
  for (size_t level = to; level-- > from;) entry = tiers_[level]->Fill(std::move(entry));
  return entry;
}

void TierStack::Removed(size_t level, const std::vector<std::string>& keys) {
  for (size_t above = 0; above < level; ++above) tiers_[above]->Forget(keys);
}

}  // namespace jitd::serving
