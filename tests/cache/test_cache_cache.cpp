// Publish, lookup, the checksum on every read, recency without writes on the
// hit path, stats, verify, read-only access.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <optional>
#include <set>
#include <thread>

#include "testing.h"

namespace jitd::cache {
namespace {

namespace fs = std::filesystem;
using testing::CubinFor;
using testing::FlipBytes;
using testing::KeyFor;
using testing::MetaFor;
using testing::OpenCache;
using testing::Options;
using testing::TempDir;

uint64_t FileSizeOr0(const fs::path& p) {
  std::error_code ec;
  auto n = fs::file_size(p, ec);
  return ec ? 0 : n;
}

TEST(Cache, PublishedEntryIsReturnedWithItsMetadata) {
  TempDir dir;
  auto cache = OpenCache(Options(dir.path()));
  EntryMeta meta = MetaFor(1);
  ASSERT_TRUE(cache->Publish(meta, CubinFor(1)).ok());
  auto e = cache->Lookup(meta.key);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->cubin, CubinFor(1));
  EXPECT_EQ(e->meta.kernel, meta.kernel);
  EXPECT_EQ(e->meta.symbols, meta.symbols);
  EXPECT_EQ(e->meta.options, meta.options);
  EXPECT_GT(e->meta.created_unix_ms, 0);
  EXPECT_TRUE(fs::exists(e->blob_path));
  EXPECT_EQ(e->checksum.size(), 32u);
}

TEST(Cache, PublishSealsWhatALookupWouldReturn) {
  TempDir dir;
  auto cache = OpenCache(Options(dir.path()));
  const EntryMeta meta = MetaFor(2);
  std::optional<Entry> sealed;
  ASSERT_TRUE(cache->Publish(meta, CubinFor(2), &sealed).ok());
  ASSERT_TRUE(sealed.has_value());
  auto e = cache->Lookup(meta.key, LookupCounting::kUncounted);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(sealed->blob_path, e->blob_path);
  EXPECT_EQ(sealed->checksum, e->checksum);
  EXPECT_EQ(sealed->meta.created_unix_ms, e->meta.created_unix_ms);
  EXPECT_EQ(sealed->meta.symbols, e->meta.symbols);
  EXPECT_TRUE(sealed->cubin.empty()) << "the caller has the cubin; the seal carries none";
  // A key already present is another writer's blob: nothing sealed.
  std::optional<Entry> again;
  ASSERT_TRUE(cache->Publish(meta, CubinFor(2), &again).ok());
  EXPECT_FALSE(again.has_value());
}

TEST(Cache, MissIsNotFoundAndCounted) {
  TempDir dir;
  auto cache = OpenCache(Options(dir.path()));
  auto e = cache->Lookup(KeyFor(99));
  EXPECT_TRUE(absl::IsNotFound(e.status())) << e.status();
  auto s = cache->Stats();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->misses, 1u);
  EXPECT_EQ(s->hits, 0u);
}

TEST(Cache, MalformedKeyIsRejectedNotLookedUp) {
  TempDir dir;
  auto cache = OpenCache(Options(dir.path()));
  EXPECT_TRUE(absl::IsInvalidArgument(cache->Lookup("../../etc/passwd").status()));
  EntryMeta bad = MetaFor(1);
  bad.key = "NOT-HEX";
  EXPECT_TRUE(absl::IsInvalidArgument(cache->Publish(bad, "x")));
}

TEST(Cache, FirstPublishOfAKeyWins) {
  TempDir dir;
  auto cache = OpenCache(Options(dir.path()));
  EntryMeta meta = MetaFor(5);
  ASSERT_TRUE(cache->Publish(meta, CubinFor(5)).ok());
  meta.log = "a different log";
  ASSERT_TRUE(cache->Publish(meta, "other bytes").ok());
  auto e = cache->Lookup(meta.key);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->cubin, CubinFor(5));
  EXPECT_EQ(cache->Stats()->entries, 1u);
  // Only one blob file exists for the key.
  size_t files = 0;
  for (const auto& f : fs::recursive_directory_iterator(dir.path() / "blobs")) files += f.is_regular_file();
  EXPECT_EQ(files, 1u);
}

TEST(Cache, StatsCountEntriesBytesHitsAndPublishes) {
  TempDir dir;
  auto cache = OpenCache(Options(dir.path()));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(cache->Publish(MetaFor(i), CubinFor(i, 1000)).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cache->Lookup(KeyFor(i)).ok());
  auto s = cache->Stats();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->entries, 5u);
  EXPECT_GT(s->bytes, 5000u);
  EXPECT_EQ(s->hits, 3u);
  EXPECT_EQ(s->publishes, 5u);
  // Counters survive a reopen: they are flushed to the index.
  cache.reset();
  cache = OpenCache(Options(dir.path()));
  s = cache->Stats();
  EXPECT_EQ(s->hits, 3u);
  EXPECT_EQ(s->publishes, 5u);
}

TEST(Cache, HitsDoNotWriteTheIndexUntilFlush) {
  TempDir dir;
  auto cache = OpenCache(Options(dir.path()));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(cache->Publish(MetaFor(i), CubinFor(i)).ok());
  ASSERT_TRUE(cache->Flush().ok());
  fs::path wal = dir.path() / "index.sqlite-wal";
  fs::path db = dir.path() / "index.sqlite";
  uint64_t wal_before = FileSizeOr0(wal), db_before = FileSizeOr0(db);
  auto mtime_before = fs::last_write_time(db);
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(cache->Lookup(KeyFor(i)).ok());
  }
  EXPECT_EQ(FileSizeOr0(wal), wal_before);
  EXPECT_EQ(FileSizeOr0(db), db_before);
  EXPECT_EQ(fs::last_write_time(db), mtime_before);
  // The hits were queued, not lost: a flush records them.
  auto before = cache->List({});
  ASSERT_TRUE(before.ok());  // List flushes first
  for (const auto& info : *before) EXPECT_EQ(info.hits, 50u) << info.key;
}

// A flush moves this process's counter deltas into the index. Stats() read
// while one is in flight must still see every counted hit: the counters
// only ever grow, whoever flushes.
TEST(Cache, StatsNeverLosesACountWhileAFlushIsInFlight) {
  TempDir dir;
  auto cache = OpenCache(Options(dir.path()));
  ASSERT_TRUE(cache->Publish(MetaFor(1), CubinFor(1)).ok());
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int round = 0; round < 300; ++round) {
      for (int i = 0; i < 5; ++i) (void)cache->Lookup(KeyFor(1));
      (void)cache->Flush();
    }
    done = true;
  });
  uint64_t last = 0, reads = 0, dips = 0;
  while (!done) {
    auto s = cache->Stats();
    ASSERT_TRUE(s.ok()) << s.status();
    if (s->hits < last) ++dips;
    last = std::max(last, s->hits);
    ++reads;
  }
  writer.join();
  EXPECT_EQ(dips, 0u) << "Stats() saw fewer hits than before in " << dips << " of " << reads << " reads";
  EXPECT_EQ(cache->Stats()->hits, 1500u);
}

TEST(Cache, RecencyOrdersListingMostRecentFirst) {
  TempDir dir;
  auto cache = OpenCache(Options(dir.path()));
  for (int i = 0; i < 3; ++i) {
    EntryMeta m = MetaFor(i);
    m.created_unix_ms = 1000 + i;  // long ago, in order
    ASSERT_TRUE(cache->Publish(m, CubinFor(i)).ok());
  }
  ASSERT_TRUE(cache->Lookup(KeyFor(0)).ok());
  auto list = cache->List({});
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].key, KeyFor(0));
  EXPECT_EQ((*list)[1].key, KeyFor(2));
  EXPECT_EQ((*list)[2].key, KeyFor(1));
}

// The client's read-only fallback finds one instantiation's entries by their
// exact canonical params: no prefix or pattern match, and "" means "none".
TEST(Cache, ListFiltersByExactParams) {
  TempDir dir;
  auto cache = OpenCache(Options(dir.path()));
  EntryMeta bf16 = MetaFor(1, "k.a");
  bf16.params = "dtype=bf16";
  EntryMeta bf16_wide = MetaFor(2, "k.a");
  bf16_wide.params = "dtype=bf16,width=8";
  EntryMeta none = MetaFor(3, "k.b");
  none.params = "";
  EntryMeta other_kernel = MetaFor(4, "k.b");
  other_kernel.params = "dtype=bf16";
  for (const EntryMeta* m : {&bf16, &bf16_wide, &none, &other_kernel}) {
    ASSERT_TRUE(cache->Publish(*m, CubinFor(1)).ok());
  }
  using Keys = std::set<std::string>;
  auto keys = [&](const ListFilter& f) {
    Keys out;
    auto list = cache->List(f);
    EXPECT_TRUE(list.ok()) << list.status();
    if (list.ok()) {
      for (const auto& info : *list) out.insert(info.key);
    }
    return out;
  };
  EXPECT_EQ(keys({.params = "dtype=bf16"}), (Keys{bf16.key, other_kernel.key}));
  EXPECT_EQ(keys({.kernel_glob = "k.a", .params = "dtype=bf16"}), Keys{bf16.key});
  EXPECT_EQ(keys({.params = "dtype=bf16,width=8"}), Keys{bf16_wide.key});
  EXPECT_EQ(keys({.params = ""}), Keys{none.key});
  EXPECT_EQ(keys({.params = "dtype=*"}), Keys{});  // not a pattern
  EXPECT_EQ(keys({}).size(), 4u);                  // unset: any params
}

// ForEach walks what List returns, in List's order, one entry at a time,
// and stops when asked to.
TEST(Cache, ForEachVisitsWhatListReturnsInOrderAndStopsWhenAsked) {
  TempDir dir;
  auto cache = OpenCache(Options(dir.path()));
  for (int i = 0; i < 5; ++i) {
    EntryMeta m = MetaFor(i, i % 2 == 0 ? "k.even" : "k.odd");
    m.created_unix_ms = 1000 + i;
    ASSERT_TRUE(cache->Publish(m, CubinFor(i)).ok());
  }
  auto list = cache->List({.kernel_glob = "k.even"});
  ASSERT_TRUE(list.ok()) << list.status();
  std::vector<std::string> listed, visited;
  for (const EntryInfo& info : *list) listed.push_back(info.key);
  ASSERT_TRUE(cache
                  ->ForEach({.kernel_glob = "k.even"},
                            [&](const EntryInfo& info) {
                              visited.push_back(info.key);
                              return true;
                            })
                  .ok());
  EXPECT_EQ(visited, listed);
  EXPECT_EQ(visited.size(), 3u);
  size_t seen = 0;
  ASSERT_TRUE(cache->ForEach({}, [&](const EntryInfo&) { return ++seen < 2; }).ok());
  EXPECT_EQ(seen, 2u) << "false stops the walk";
}

// The most entries one instantiation has: keys of one (kernel, params,
// arch, options) kept side by side, such as a kernel's older generations.
TEST(Cache, LargestInstantiationCountsTheKeysOfOneInstantiation) {
  TempDir dir;
  auto cache = OpenCache(Options(dir.path()));
  auto largest = cache->LargestInstantiation();
  ASSERT_TRUE(largest.ok()) << largest.status();
  EXPECT_EQ(*largest, 0u) << "an empty cache";
  for (int i = 0; i < 3; ++i) {
    EntryMeta m = MetaFor(i, "k.same");  // three generations of one instantiation
    m.params = "dtype=bf16";
    ASSERT_TRUE(cache->Publish(m, CubinFor(i)).ok());
  }
  EntryMeta other_params = MetaFor(7, "k.same");
  other_params.params = "dtype=fp16";
  EntryMeta other_arch = MetaFor(8, "k.same", "sm_100a");
  other_arch.params = "dtype=bf16";
  ASSERT_TRUE(cache->Publish(other_params, CubinFor(7)).ok());
  ASSERT_TRUE(cache->Publish(other_arch, CubinFor(8)).ok());
  largest = cache->LargestInstantiation();
  ASSERT_TRUE(largest.ok()) << largest.status();
  EXPECT_EQ(*largest, 3u);
}

class CorruptBlob : public ::testing::TestWithParam<std::string> {};

// ccache's "corrupt result file" test: damage a blob on disk, expect a miss,
// the entry dropped and counted, and a later publish to be served again.
TEST_P(CorruptBlob, IsAMissDroppedCountedAndNeverServed) {
  TempDir dir;
  auto cache = OpenCache(Options(dir.path()));
  EntryMeta meta = MetaFor(3);
  ASSERT_TRUE(cache->Publish(meta, CubinFor(3)).ok());
  auto e = cache->Lookup(meta.key);
  ASSERT_TRUE(e.ok());
  fs::path blob = e->blob_path;
  uint64_t size = fs::file_size(blob);
  const std::string& how = GetParam();
  if (how == "flip-header") FlipBytes(blob, 10);
  if (how == "flip-middle") FlipBytes(blob, size / 2);
  if (how == "flip-checksum") FlipBytes(blob, size - 3);
  if (how == "truncate") testing::Truncate(blob, size - 100);
  if (how == "empty") testing::Truncate(blob, 0);
  if (how == "delete") fs::remove(blob);

  auto again = cache->Lookup(meta.key);
  EXPECT_TRUE(absl::IsNotFound(again.status())) << again.status();
  EXPECT_FALSE(*cache->Contains(meta.key)) << "corrupt row must be dropped";
  EXPECT_FALSE(fs::exists(blob)) << "corrupt blob must be removed";
  ASSERT_TRUE(cache->Flush().ok());
  auto s = cache->Stats();
  EXPECT_EQ(s->corrupt, 1u);
  EXPECT_EQ(s->entries, 0u);
  EXPECT_EQ(s->bytes, 0u);
  // Repaired on the next publish (a recompile, in the daemon).
  ASSERT_TRUE(cache->Publish(meta, CubinFor(3)).ok());
  auto fixed = cache->Lookup(meta.key);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->cubin, CubinFor(3));
}

INSTANTIATE_TEST_SUITE_P(Damage, CorruptBlob,
                         ::testing::Values("flip-header", "flip-middle", "flip-checksum", "truncate", "empty",
                                           "delete"));

TEST(Cache, BlobSwappedForAnotherValidBlobIsNotServed) {
  TempDir dir;
  auto cache = OpenCache(Options(dir.path()));
  ASSERT_TRUE(cache->Publish(MetaFor(1), CubinFor(1)).ok());
  ASSERT_TRUE(cache->Publish(MetaFor(2), CubinFor(2)).ok());
  auto a = cache->Lookup(KeyFor(1));
  auto b = cache->Lookup(KeyFor(2));
  ASSERT_TRUE(a.ok() && b.ok());
  fs::copy_file(b->blob_path, a->blob_path, fs::copy_options::overwrite_existing);
  EXPECT_TRUE(absl::IsNotFound(cache->Lookup(KeyFor(1)).status()));
  EXPECT_TRUE(cache->Lookup(KeyFor(2)).ok());
}

TEST(Cache, VerifyReportsDamageAndRepairsOnlyWhenAsked) {
  TempDir dir;
  auto cache = OpenCache(Options(dir.path()));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(cache->Publish(MetaFor(i), CubinFor(i)).ok());
  auto e1 = cache->Lookup(KeyFor(1));
  auto e2 = cache->Lookup(KeyFor(2));
  FlipBytes(e1->blob_path, 200);
  fs::remove(e2->blob_path);
  std::ofstream(dir.path() / "blobs" / "stray-file") << "x";

  auto report = cache->Verify(false);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->checked, 4u);
  EXPECT_EQ(report->ok, 2u);
  EXPECT_EQ(report->corrupt, 1u);
  EXPECT_EQ(report->missing_blobs, 1u);
  EXPECT_EQ(report->index_integrity, "ok");
  EXPECT_EQ(report->repaired, 0u);
  EXPECT_EQ(cache->Stats()->entries, 4u) << "verify without repair changes nothing";

  auto repaired = cache->Verify(true);
  ASSERT_TRUE(repaired.ok());
  EXPECT_EQ(repaired->repaired, 2u);
  EXPECT_EQ(cache->Stats()->entries, 2u);
  auto clean = cache->Verify(false);
  EXPECT_EQ(clean->corrupt + clean->missing_blobs + clean->orphan_blobs, 0u);
}

TEST(Cache, ReadOnlyServesButNeverWrites) {
  TempDir dir;
  {
    auto writer = OpenCache(Options(dir.path()));
    ASSERT_TRUE(writer->Publish(MetaFor(1), CubinFor(1)).ok());
    ASSERT_TRUE(writer->Publish(MetaFor(2), CubinFor(2)).ok());
  }
  CacheOptions ro = Options(dir.path());
  ro.read_only = true;
  auto reader = OpenCache(ro);
  auto e = reader->Lookup(KeyFor(1));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->cubin, CubinFor(1));
  EXPECT_TRUE(absl::IsFailedPrecondition(reader->Publish(MetaFor(3), CubinFor(3))));
  EXPECT_TRUE(absl::IsFailedPrecondition(reader->Evict({.keys = {KeyFor(1)}}).status()));
  // Corrupt entries are skipped, not dropped, by a read-only reader.
  FlipBytes(reader->Lookup(KeyFor(2))->blob_path, 100);
  EXPECT_TRUE(absl::IsNotFound(reader->Lookup(KeyFor(2)).status()));
  EXPECT_TRUE(*reader->Contains(KeyFor(2)));
}

TEST(Cache, ReadOnlyOpenOfAnUnwarmedDirectorySaysSo) {
  TempDir dir;
  CacheOptions ro = Options(dir.path());
  ro.read_only = true;
  auto c = Cache::Open(ro);
  EXPECT_TRUE(absl::IsFailedPrecondition(c.status())) << c.status();
  EXPECT_NE(c.status().message().find("warmed"), std::string_view::npos) << c.status();
}

TEST(Cache, UncreatableDirectoryIsAClearError) {
  // /proc refuses new directories even to root.
  auto c = Cache::Open(Options("/proc/jitd-cannot-exist"));
  EXPECT_TRUE(absl::IsFailedPrecondition(c.status())) << c.status();
}

TEST(Cache, DirectoryUnderAFileIsAClearError) {
  TempDir dir;
  std::ofstream(dir.path() / "file") << "x";
  auto c = Cache::Open(Options(dir.path() / "file" / "cache"));
  EXPECT_TRUE(absl::IsFailedPrecondition(c.status())) << c.status();
  EXPECT_NE(c.status().message().find("cannot create cache directory"), std::string_view::npos) << c.status();
}

}  // namespace
}  // namespace jitd::cache
