// Fills a cache directory before a daemon opens it, through the cache
// library's public API, as an offline warm-up writer would.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace jitd::testing {

struct SeedEntry {
  std::string key;  // lowercase hex, 16..128 digits
  std::string kernel;
  std::string params;
  std::string arch;
  std::string cubin;
};

// Three entries: two "moe.*" kernels (sm_90) and one "norm.rms" (sm_100a).
std::vector<SeedEntry> ThreeEntries();

// Publishes `entries` into the cache at `dir`; throws on failure.
void SeedCache(const std::filesystem::path& dir, const std::vector<SeedEntry>& entries);

// The blob file holding `key` (blobs/KK/KEY-CHECKSUM); throws if absent.
std::filesystem::path BlobPathOf(const std::filesystem::path& dir, const std::string& key);

// Flips one byte in the middle of `file`, as a failing disk would.
void FlipByte(const std::filesystem::path& file);

}  // namespace jitd::testing
