// A client with the read-only fallback (jitd::client_fallback), for the
// tests that stop the daemon or never start one. Header-only: only targets
// that link jitd_client_fallback include it.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "jitd/client.h"
#include "jitd/client_fallback.h"

namespace jitd::testing {

// A client of `endpoint` that answers from the cache directory `fallback`
// while no daemon answers there; an empty `fallback` leaves the directory
// to $JITD_FALLBACK_CACHE_DIR.
inline absl::StatusOr<std::unique_ptr<Client>> ConnectWithFallback(const std::string& endpoint,
                                                                   const std::filesystem::path& fallback) {
  ClientOptions options;
  options.endpoint = endpoint;
  options.fallback_cache_dir = fallback;
  options.open_fallback = OpenFallbackCache;
  return Client::Connect(options);
}

}  // namespace jitd::testing
