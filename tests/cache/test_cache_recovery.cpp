// Recovery at open: temp files of dead writers, a writer killed between the
// blob rename and the index insert, rows whose blob vanished, an index that
// is garbage or gone, and a writer killed with SIGKILL at random moments.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include "testing.h"

namespace jitd::cache {
namespace {

namespace fs = std::filesystem;
using testing::CubinFor;
using testing::KeyFor;
using testing::MetaFor;
using testing::OpenCache;
using testing::Options;
using testing::TempDir;
using testing::TempFileCount;

pid_t DeadPid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

// Writes a blob file exactly as a publish would, without its index row: the
// state a writer leaves when it is killed between rename and insert.
fs::path PlaceUnindexedBlob(const fs::path& dir, uint64_t n) {
  EntryMeta m = MetaFor(n);
  m.created_unix_ms = 1'700'000'000'000;
  std::string bytes = EncodeBlob(m, CubinFor(n));
  fs::path path = dir / "blobs" / m.key.substr(0, 2) / (m.key + "-" + Checksum128(bytes.substr(0, bytes.size() - 22)));
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(Recovery, TempFilesOfDeadWritersAreSweptAtOpen) {
  TempDir dir;
  { auto c = OpenCache(Options(dir.path())); }
  std::string key = KeyFor(1);
  std::ofstream(dir.path() / "tmp" / (key + "." + std::to_string(DeadPid()) + ".0.tmp")) << "partial";
  std::ofstream(dir.path() / "tmp" / (key + "." + std::to_string(::getpid()) + ".0.tmp")) << "in progress";
  auto c = OpenCache(Options(dir.path()));
  EXPECT_EQ(TempFileCount(dir.path()), 1u) << "only the live writer's temp file stays";
}

TEST(Recovery, BlobWrittenButNotIndexedIsAdopted) {
  TempDir dir;
  { auto c = OpenCache(Options(dir.path())); }
  PlaceUnindexedBlob(dir.path(), 7);
  auto c = OpenCache(Options(dir.path()));
  ASSERT_TRUE(c->Flush().ok());  // runs the reconcile that follows an open
  auto e = c->Lookup(KeyFor(7));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->cubin, CubinFor(7));
  EXPECT_EQ(c->Stats()->entries, 1u);
}

TEST(Recovery, CorruptUnindexedBlobIsRemovedNotAdopted) {
  TempDir dir;
  { auto c = OpenCache(Options(dir.path())); }
  fs::path blob = PlaceUnindexedBlob(dir.path(), 8);
  testing::FlipBytes(blob, 50);
  auto c = OpenCache(Options(dir.path()));
  ASSERT_TRUE(c->Flush().ok());
  EXPECT_FALSE(fs::exists(blob));
  EXPECT_EQ(c->Stats()->entries, 0u);
}

TEST(Recovery, RowsWhoseBlobVanishedAreDroppedAtOpen) {
  TempDir dir;
  fs::path blob;
  {
    auto c = OpenCache(Options(dir.path()));
    ASSERT_TRUE(c->Publish(MetaFor(1), CubinFor(1)).ok());
    ASSERT_TRUE(c->Publish(MetaFor(2), CubinFor(2)).ok());
    blob = c->Lookup(KeyFor(1))->blob_path;
  }
  fs::remove(blob);
  auto c = OpenCache(Options(dir.path()));
  ASSERT_TRUE(c->Flush().ok());
  EXPECT_EQ(c->Stats()->entries, 1u);
  EXPECT_EQ(c->Stats()->corrupt, 1u);
  EXPECT_TRUE(c->Lookup(KeyFor(2)).ok());
}

// Reconcile walks one shard directory at a time: a shard directory gone
// whole drops its rows too, and every other shard keeps its entries.
TEST(Recovery, RowsOfAShardDirectoryRemovedWholeAreDroppedAndOtherShardsKept) {
  TempDir dir;
  constexpr int kEntries = 300;  // keys spread over most of the 256 shards
  fs::path shard;
  int in_shard = 0;
  {
    auto c = OpenCache(Options(dir.path()));
    for (int i = 0; i < kEntries; ++i) ASSERT_TRUE(c->Publish(MetaFor(i), CubinFor(i)).ok());
    shard = c->Lookup(KeyFor(0))->blob_path.parent_path();
  }
  for (int i = 0; i < kEntries; ++i) in_shard += KeyFor(i).substr(0, 2) == shard.filename().string() ? 1 : 0;
  fs::remove_all(shard);
  PlaceUnindexedBlob(dir.path(), kEntries);  // and one blob to adopt elsewhere
  auto c = OpenCache(Options(dir.path()));
  ASSERT_TRUE(c->Flush().ok());
  EXPECT_EQ(c->Stats()->entries, static_cast<uint64_t>(kEntries - in_shard + 1));
  EXPECT_EQ(c->Stats()->corrupt, static_cast<uint64_t>(in_shard));
  for (int i = 0; i < kEntries; ++i) {
    EXPECT_EQ(c->Lookup(KeyFor(i)).ok(), KeyFor(i).substr(0, 2) != shard.filename().string()) << i;
  }
  EXPECT_TRUE(c->Lookup(KeyFor(kEntries)).ok()) << "the orphan is adopted";
}

class BrokenIndex : public ::testing::TestWithParam<std::string> {};

TEST_P(BrokenIndex, IsRebuiltFromTheBlobs) {
  TempDir dir;
  {
    auto c = OpenCache(Options(dir.path()));
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(c->Publish(MetaFor(i), CubinFor(i)).ok());
  }
  fs::path index = dir.path() / "index.sqlite";
  if (GetParam() == "garbage") {
    std::ofstream f(index, std::ios::binary | std::ios::trunc);
    for (int i = 0; i < 8192; ++i) f.put(static_cast<char>(i * 31));
  } else if (GetParam() == "header-flipped") {
    testing::FlipBytes(index, 0, 16);
  } else if (GetParam() == "page-flipped") {
    // Damage the b-tree pages after the header: the file still opens.
    auto size = fs::file_size(index);
    for (uint64_t off = 4096; off + 64 < size; off += 4096) testing::FlipBytes(index, off, 64);
  } else {
    fs::remove(index);
  }
  for (const char* s : {"-wal", "-shm"}) fs::remove(index.string() + s);
  // Rebuilt before Open returns, deleted or unreadable alike: no Flush (the
  // background reconcile) before the first lookup, which finds every entry
  // instead of a miss that would recompile what is on disk.
  auto c = OpenCache(Options(dir.path()));
  for (int i = 0; i < 20; ++i) {
    auto e = c->Lookup(KeyFor(i));
    ASSERT_TRUE(e.ok()) << i << ": " << e.status();
    EXPECT_EQ(e->cubin, CubinFor(i));
  }
  EXPECT_EQ(c->Stats()->entries, 20u);
  if (GetParam() != "deleted") {
    EXPECT_TRUE(c->rebuilt_index());
  }
}

INSTANTIATE_TEST_SUITE_P(Damage, BrokenIndex,
                         ::testing::Values("garbage", "header-flipped", "page-flipped", "deleted"));

// A writer process publishing as fast as it can is killed with SIGKILL at a
// random moment, again and again. Every publish it reported complete must
// survive; nothing half-written may ever be served; no temp file may remain.
TEST(Recovery, WriterKilledAtRandomMomentsLosesNothingItReported) {
  TempDir dir;
  std::mt19937 rng(12345);
  std::vector<uint64_t> reported;
  uint64_t next = 0;
  constexpr int kKills = 25;
  for (int round = 0; round < kKills; ++round) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    uint64_t first = next;
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      CacheOptions o = Options(dir.path());
      auto c = Cache::Open(o);
      if (!c.ok()) ::_exit(3);
      for (uint64_t n = first;; ++n) {
        if (!(*c)->Publish(MetaFor(n), CubinFor(n, 2000 + n % 5000)).ok()) ::_exit(4);
        if (::write(fds[1], &n, sizeof n) != sizeof n) ::_exit(5);
      }
    }
    ::close(fds[1]);
    // Let the writer finish a random number of publishes, then kill it
    // wherever it is (often mid-publish).
    int wait_for = std::uniform_int_distribution<int>(1, 12)(rng);
    uint64_t n;
    for (int i = 0; i < wait_for && ::read(fds[0], &n, sizeof n) == sizeof n; ++i) reported.push_back(n);
    ::kill(pid, SIGKILL);
    while (::read(fds[0], &n, sizeof n) == sizeof n) reported.push_back(n);
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "writer failed with exit " << WEXITSTATUS(status);
    next = reported.empty() ? first + 1000 : std::max(first + 1000, reported.back() + 1);
  }
  auto c = OpenCache(Options(dir.path()));
  ASSERT_TRUE(c->Flush().ok());
  EXPECT_EQ(TempFileCount(dir.path()), 0u);
  for (uint64_t k : reported) {
    auto e = c->Lookup(KeyFor(k));
    ASSERT_TRUE(e.ok()) << "entry " << k << " lost: " << e.status();
    EXPECT_EQ(e->cubin, CubinFor(k, 2000 + k % 5000));
  }
  auto report = c->Verify(false);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->corrupt, 0u);
  EXPECT_EQ(report->missing_blobs, 0u);
  EXPECT_EQ(report->orphan_blobs, 0u);
  EXPECT_EQ(report->index_integrity, "ok");
  EXPECT_GE(report->ok, reported.size());
}

}  // namespace
}  // namespace jitd::cache
