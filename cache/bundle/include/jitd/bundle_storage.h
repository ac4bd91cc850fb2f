// BundleStorage: sealed seed bundles as a storage level (jitd/storage.h).
#pragma once

#include <vector>

#include "jitd/bundle.h"
#include "jitd/storage.h"

namespace jitd::cache {

// Bundles mounted read-only, asked in the order given, each entry read and
// verified again at each hit (Bundle::Find). Nothing is ever written or
// evicted here; a hit is counted, not recorded, and fills memory only. An
// entry that no longer verifies (the file was changed under the daemon)
// misses, is logged once and counted (stats().corrupt); the compile or the
// remote level answers instead.
class BundleStorage final : public Storage {
 public:
  // `bundles` must outlive this.
  explicit BundleStorage(std::vector<const Bundle*> bundles) : bundles_(std::move(bundles)) {}
  Level level() const override { return Level::kBundle; }
  bool copied_to_durable_levels() const override { return false; }
  std::shared_ptr<const Entry> Fill(std::shared_ptr<const Entry> entry) override { return entry; }
  void RecordUse(const std::string&) override {}
  void Forget(const std::vector<std::string>&) override {}
  const std::vector<const Bundle*>& bundles() const { return bundles_; }

 protected:
  std::shared_ptr<const Entry> Find(const std::string& key, std::chrono::steady_clock::time_point) override;

 private:
  const std::vector<const Bundle*> bundles_;
};

}  // namespace jitd::cache
