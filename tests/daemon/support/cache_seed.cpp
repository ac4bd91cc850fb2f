#include "cache_seed.h"

#include <fstream>
#include <stdexcept>

#include "jitd/cache.h"

namespace jitd::testing {

std::vector<SeedEntry> ThreeEntries() {
  return {
      {std::string(32, 'a'), "moe.topk_sum", "dtype=bf16", "sm_90", std::string(4096, '\x7f')},
      {std::string(32, 'b'), "moe.align_block", "block=128", "sm_90", std::string(2048, '\x01')},
      {std::string(32, 'c'), "norm.rms", "dtype=fp16", "sm_100a", std::string(1024, '\x02')},
  };
}

void SeedCache(const std::filesystem::path& dir, const std::vector<SeedEntry>& entries) {
  cache::CacheOptions options;
  options.dir = dir;
  options.background = false;
  absl::StatusOr<std::unique_ptr<cache::Cache>> opened = cache::Cache::Open(options);
  if (!opened.ok()) throw std::runtime_error(std::string(opened.status().message()));
  for (const SeedEntry& entry : entries) {
    cache::EntryMeta meta;
    meta.key = entry.key;
    meta.kernel = entry.kernel;
    meta.params = entry.params;
    meta.arch = entry.arch;
    meta.nvrtc_version = "13.0";
    meta.symbols = {{"sglang::" + entry.kernel, "_Z6kernelv"}};
    meta.compile_ms = 12.5;
    if (absl::Status published = (*opened)->Publish(meta, entry.cubin); !published.ok()) {
      throw std::runtime_error(std::string(published.message()));
    }
  }
  if (absl::Status flushed = (*opened)->Flush(); !flushed.ok()) {
    throw std::runtime_error(std::string(flushed.message()));
  }
}

std::filesystem::path BlobPathOf(const std::filesystem::path& dir, const std::string& key) {
  const std::filesystem::path shard = dir / "blobs" / key.substr(0, 2);
  for (const auto& file : std::filesystem::directory_iterator(shard)) {
    if (file.path().filename().string().starts_with(key + "-")) return file.path();
  }
  throw std::runtime_error("no blob for " + key + " in " + shard.string());
}

void FlipByte(const std::filesystem::path& file) {
  std::fstream stream(file, std::ios::in | std::ios::out | std::ios::binary);
  const auto middle = static_cast<std::streamoff>(std::filesystem::file_size(file) / 2);
  stream.seekg(middle);
  char byte = 0;
  stream.get(byte);
  stream.seekp(middle);
  stream.put(static_cast<char>(byte ^ 0x5a));
  if (!stream) throw std::runtime_error("cannot flip a byte in " + file.string());
}

}  // namespace jitd::testing
