#include "serving/tier.h"

namespace jitd::serving {
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

Origin OriginOf(cache::Level level) {
  switch (level) {
    case cache::Level::kMemory:
      return Origin::kMemory;
    case cache::Level::kDisk:
    case cache::Level::kDirectory:
      return Origin::kDisk;
    case cache::Level::kBundle:
      return Origin::kBundle;
    case cache::Level::kRemote:
      return Origin::kRemote;
  }
  return Origin::kNone;
}

std::shared_ptr<const cache::Entry> MemoryTier::Fill(std::shared_ptr<const cache::Entry> entry) {
  hot_.Put(entry->meta.key, entry);
  CountFill(true);
  return entry;
}

void MemoryTier::Forget(const std::vector<std::string>& keys) {
  for (const auto& key : keys) hot_.Erase(key);
}

TierStack::TierStack(std::vector<cache::Storage*> tiers) : tiers_(std::move(tiers)) {
  for (size_t level = 0; level < tiers_.size(); ++level) {
    tiers_[level]->OnRemoved([this, level](const std::vector<std::string>& keys) { Removed(level, keys); });
  }
}

TierStack::~TierStack() {
  for (cache::Storage* tier : tiers_) tier->OnRemoved(nullptr);
}

std::optional<TierStack::Hit> TierStack::Lookup(const std::string& key, size_t begin, size_t end,
                                                std::chrono::steady_clock::time_point deadline) {
  end = std::min(end, tiers_.size());
  for (size_t level = begin; level < end; ++level) {
    std::shared_ptr<const cache::Entry> entry = tiers_[level]->Lookup(key, deadline);
    if (entry == nullptr) continue;
    for (size_t below = level + 1; below < tiers_.size(); ++below) tiers_[below]->RecordUse(key);
    const bool to_durable = tiers_[level]->copied_to_durable_levels();
    for (size_t above = level; above-- > 0;) {
      if (to_durable || !tiers_[above]->durable()) entry = tiers_[above]->Fill(std::move(entry));
    }
    return Hit{std::move(entry), OriginOf(tiers_[level]->level())};
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
