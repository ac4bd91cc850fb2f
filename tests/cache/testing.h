// Test fixtures for the cache: temporary directories, synthetic entries,
// and the byte-level damage that the corruption tests inflict.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "jitd/cache.h"
#include "temp_dir.h"

namespace jitd::cache::testing {

// A fresh directory, removed with everything in it (tests/support).
using jitd::testing::TempDir;

// A well-formed 32-hex-digit key derived from `n` (distinct n, distinct keys).
std::string KeyFor(uint64_t n);

// Entry metadata for `n`, with a recognisable kernel name and symbols.
EntryMeta MetaFor(uint64_t n, std::string kernel = "test.kernel", std::string arch = "sm_90");

// Deterministic pseudo-cubin bytes for `n` of `size` bytes, so a reader can
// check that what it got belongs to the key it asked for.
std::string CubinFor(uint64_t n, size_t size = 4096);

CacheOptions Options(const std::filesystem::path& dir, uint64_t max_bytes = 0);

// Opens a cache, failing the current test (and returning null) if it cannot.
std::unique_ptr<Cache> OpenCache(const CacheOptions& options);

// XORs `count` bytes at `offset` with 0xFF (ccache's `dd` test, in C++).
void FlipBytes(const std::filesystem::path& file, uint64_t offset, size_t count = 3);
void Truncate(const std::filesystem::path& file, uint64_t size);

// Files under DIR/tmp.
size_t TempFileCount(const std::filesystem::path& cache_dir);

}  // namespace jitd::cache::testing
