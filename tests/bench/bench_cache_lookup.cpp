// Cache lookup latency at 100k entries: hit and miss, against the floor the
// design stands on (a bare SQLite point lookup on the same index, of a
// present key for a hit and of an absent one for a miss, and a bare
// open+read+XXH3 of the same blob files).
//
//   build/tests/bench/bench_cache_lookup [--benchmark_repetitions=5]
//   JITD_BENCH_ENTRIES=100000 JITD_BENCH_CUBIN_BYTES=16384 (the defaults)
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "testing.h"

namespace {

using namespace jitd::cache;
namespace fs = std::filesystem;

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtoull(v, nullptr, 10) : fallback;
}

// One populated cache shared by every benchmark in the run.
struct Fixture {
  testing::TempDir dir;
  std::unique_ptr<Cache> cache;
  uint64_t entries = EnvOr("JITD_BENCH_ENTRIES", 100000);
  size_t cubin_bytes = EnvOr("JITD_BENCH_CUBIN_BYTES", 16384);
  std::vector<fs::path> blob_paths;  // a sample, for the file-read floor

  Fixture() {
    CacheOptions o = testing::Options(dir.path());
    o.sync_writes = false;  // population only; lookups never sync anyway
    auto start = std::chrono::steady_clock::now();
    {
      auto c = Cache::Open(o);
      if (!c.ok()) std::abort();
      std::string cubin = testing::CubinFor(1, cubin_bytes);
      for (uint64_t i = 0; i < entries; ++i) {
        if (!(*c)->Publish(testing::MetaFor(i), cubin).ok()) std::abort();
      }
      if (!(*c)->Flush().ok()) std::abort();
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "populated %llu entries of %zu-byte cubins in %.1f s\n",
                 static_cast<unsigned long long>(entries), cubin_bytes, s);
    auto c = Cache::Open(testing::Options(dir.path()));
    if (!c.ok()) std::abort();
    cache = std::move(*c);
    for (uint64_t i = 0; i < 1000; ++i)
      blob_paths.push_back(cache->Lookup(testing::KeyFor(i * (entries / 1000)))->blob_path);
  }
};

Fixture& F() {
  static Fixture f;
  return f;
}

void BM_LookupHit(benchmark::State& state) {
  auto& f = F();
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<uint64_t> pick(0, f.entries - 1);
  for (auto _ : state) {
    auto e = f.cache->Lookup(testing::KeyFor(pick(rng)));
    if (!e.ok()) state.SkipWithError("miss on a hit benchmark");
    benchmark::DoNotOptimize(e);
  }
}

void BM_LookupMiss(benchmark::State& state) {
  auto& f = F();
  uint64_t n = f.entries + 1;
  for (auto _ : state) {
    auto e = f.cache->Lookup(testing::KeyFor(n++));
    benchmark::DoNotOptimize(e);
  }
}

// Floor 1: the index query alone, on a connection of our own.
void BM_Floor_SqlitePointLookup(benchmark::State& state) {
  auto& f = F();
  sqlite3* db = nullptr;
  sqlite3_open_v2((f.dir.path() / "index.sqlite").c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "SELECT checksum, size FROM entries WHERE key = ?", -1, &st, nullptr);
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<uint64_t> pick(0, f.entries - 1);
  for (auto _ : state) {
    std::string key = testing::KeyFor(pick(rng));
    sqlite3_bind_text(st, 1, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_ROW) state.SkipWithError("row missing");
    benchmark::DoNotOptimize(sqlite3_column_text(st, 0));
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
}

// The floor of a miss: the same index query for a key that is not there
// (a miss is this and nothing more; a present row costs its read too).
void BM_Floor_SqlitePointMiss(benchmark::State& state) {
  auto& f = F();
  sqlite3* db = nullptr;
  sqlite3_open_v2((f.dir.path() / "index.sqlite").c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "SELECT checksum, size FROM entries WHERE key = ?", -1, &st, nullptr);
  uint64_t n = f.entries + 1;
  for (auto _ : state) {
    std::string key = testing::KeyFor(n++);
    sqlite3_bind_text(st, 1, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_DONE) state.SkipWithError("a row for a key never published");
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
}

// Floor 2: open, read and hash a blob file of the same size.
void BM_Floor_ReadAndHashBlob(benchmark::State& state) {
  auto& f = F();
  std::string buf;
  size_t i = 0;
  for (auto _ : state) {
    const fs::path& p = f.blob_paths[i++ % f.blob_paths.size()];
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st;
    ::fstat(fd, &st);
    buf.resize(static_cast<size_t>(st.st_size));
    benchmark::DoNotOptimize(::read(fd, buf.data(), buf.size()));
    ::close(fd);
    benchmark::DoNotOptimize(XXH3_128bits(buf.data(), buf.size()));
  }
}

BENCHMARK(BM_Floor_SqlitePointLookup);
BENCHMARK(BM_Floor_SqlitePointMiss);
BENCHMARK(BM_Floor_ReadAndHashBlob);
BENCHMARK(BM_LookupHit);
BENCHMARK(BM_LookupMiss);

}  // namespace

BENCHMARK_MAIN();
