// The client's read-only look into a warmed cache directory, used when the
// daemon cannot be reached. The rule it applies is documented at
// ClientOptions::fallback_cache_dir in jitd/client.h.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "jitd/cache.h"
#include "jitd/client.h"

namespace jitd::client_detail {

class FallbackCache {
 public:
  explicit FallbackCache(std::filesystem::path dir);
  ~FallbackCache();

  const std::filesystem::path& dir() const { return dir_; }

  // The verified entry for `spec` (source FALLBACK), or why there is none:
  // NOT_FOUND (no entry, or only corrupt ones), FAILED_PRECONDITION (the
  // directory is not a readable cache, the spec has options, or its empty
  // arch is ambiguous). Messages name the directory and the instantiation.
  absl::StatusOr<KernelBinary> Find(const KernelSpec& spec);

 private:
  // The cache, opened read-only at first use; an open that failed (the
  // directory not warmed yet) is tried again at the next Find().
  absl::StatusOr<cache::Cache*> OpenCache();

  const std::filesystem::path dir_;
  std::mutex open_mu_;  // guards cache_
  std::unique_ptr<cache::Cache> cache_;
};

}  // namespace jitd::client_detail
