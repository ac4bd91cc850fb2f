// jitd's read-only fallback: the manual of `jitd::client_fallback`, the
// optional component of the client library that answers kernel requests
// from a warmed cache directory while the daemon cannot be reached.
//
// jitd::client alone needs gRPC and Protobuf; this component adds SQLite (it
// reads the directory's index.sqlite, read-only, and never writes it). Link
// it and hand its opener to the client:
//
//   find_package(jitd REQUIRED COMPONENTS client_fallback)
//   target_link_libraries(app PRIVATE jitd::client jitd::client_fallback)
//
//   jitd::ClientOptions options;
//   options.open_fallback = jitd::OpenFallbackCache;
//   options.fallback_cache_dir = "/var/cache/jitd";  // or JITD_FALLBACK_CACHE_DIR
//   auto client = jitd::Client::Connect(options);
//
// The rule it answers by is ClientOptions::fallback_cache_dir's (jitd/client.h).
#pragma once

#include <filesystem>
#include <memory>

#include "jitd/client.h"

namespace jitd {

// A fallback reading the cache directory `dir`. Opening is lazy: a
// directory that is not a cache yet (not warmed) makes each Find() fail
// with FAILED_PRECONDITION, and is tried again at the next one.
std::unique_ptr<KernelFallback> OpenFallbackCache(const std::filesystem::path& dir);

}  // namespace jitd
