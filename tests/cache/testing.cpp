#include "testing.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace jitd::cache::testing {

namespace fs = std::filesystem;

std::string KeyFor(uint64_t n) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(n * 0x9E3779B97F4A7C15ull),
                static_cast<unsigned long long>(n));
  return buf;
}

EntryMeta MetaFor(uint64_t n, std::string kernel, std::string arch) {
  EntryMeta m;
  m.key = KeyFor(n);
  m.kernel = std::move(kernel);
  m.params = "dtype=bf16,n=" + std::to_string(n);
  m.arch = std::move(arch);
  m.options = {"-std=c++17", "-lineinfo"};
  m.nvrtc_version = "13.0";
  m.symbols = {
      {"sglang::test::kernel<" + std::to_string(n) + ">", "_ZN6sglang4test6kernelILi" + std::to_string(n) + "EEEvv"}};
  m.log = "";
  m.compile_ms = 12.5;
  return m;
}

std::string CubinFor(uint64_t n, size_t size) {
  std::string out(size, '\0');
  uint64_t x = n * 6364136223846793005ull + 1442695040888963407ull;
  for (size_t i = 0; i < size; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    out[i] = static_cast<char>(x >> 56);
  }
  return out;
}

CacheOptions Options(const fs::path& dir, uint64_t max_bytes) {
  CacheOptions o;
  o.dir = dir;
  o.max_bytes = max_bytes;
  o.background = false;
  return o;
}

std::unique_ptr<Cache> OpenCache(const CacheOptions& options) {
  auto c = Cache::Open(options);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

void FlipBytes(const fs::path& file, uint64_t offset, size_t count) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f) << file;
  for (size_t i = 0; i < count; ++i) {
    f.seekg(static_cast<std::streamoff>(offset + i));
    char c;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(offset + i));
    f.put(static_cast<char>(c ^ 0xFF));
  }
}

void Truncate(const fs::path& file, uint64_t size) { fs::resize_file(file, size); }

size_t TempFileCount(const fs::path& cache_dir) {
  size_t n = 0;
  std::error_code ec;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(cache_dir / "tmp", ec)) ++n;
  return n;
}

}  // namespace jitd::cache::testing
