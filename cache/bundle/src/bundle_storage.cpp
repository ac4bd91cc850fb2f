#include "jitd/bundle_storage.h"

#include <spdlog/spdlog.h>

namespace jitd::cache {

std::shared_ptr<const Entry> BundleStorage::Find(const std::string& key, std::chrono::steady_clock::time_point) {
  for (const Bundle* bundle : bundles_) {
    absl::StatusOr<Entry> found = bundle->Find(key);
    if (found.ok()) return std::make_shared<const Entry>(*std::move(found));
    if (absl::IsNotFound(found.status())) continue;
    // Verified whole at mount: the file changed since. Never served; the
    // first time per daemon is an error, the rest are counted.
    if (CountCorrupt() == 0) {
      spdlog::error(
          "bundle {} no longer verifies: {}; its entries miss until the daemon is restarted with a good "
          "copy (further failures are only counted: Stats bundle_corrupt)",
          bundle->path().string(), found.status().ToString());
    }
  }
  return nullptr;
}

}  // namespace jitd::cache
