// Two processes on one cache directory at once (a daemon and an offline
// warm-up writer): both publish overlapping keys with different bytes, both
// read, one evicts. No errors, no torn or foreign reads, no lost entries.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>

#include "testing.h"

namespace jitd::cache {
namespace {

using testing::CubinFor;
using testing::KeyFor;
using testing::MetaFor;
using testing::Options;
using testing::TempDir;

constexpr uint64_t kKeys = 150;

// Exit codes a worker reports; 0 is success.
enum : int { kOk = 0, kOpenFailed = 10, kPublishFailed = 11, kLookupError = 12, kForeignBytes = 13, kEvictFailed = 14 };

// Publishes every key (in its own order, with its own log text so the two
// processes' blobs differ) and reads random keys, checking every hit holds
// exactly the bytes that belong to its key.
int Worker(const std::filesystem::path& dir, int id, bool evicts) {
  CacheOptions o = Options(dir);
  o.background = true;
  o.flush_interval = std::chrono::milliseconds(20);
  auto c = Cache::Open(o);
  if (!c.ok()) return kOpenFailed;
  std::mt19937 rng(static_cast<unsigned>(id));
  std::vector<uint64_t> order(kKeys);
  for (uint64_t i = 0; i < kKeys; ++i) order[i] = id == 0 ? i : kKeys - 1 - i;
  for (uint64_t n : order) {
    EntryMeta m = MetaFor(n);
    m.log = "written by worker " + std::to_string(id);
    if (!(*c)->Publish(m, CubinFor(n)).ok()) return kPublishFailed;
    for (int r = 0; r < 3; ++r) {
      uint64_t k = std::uniform_int_distribution<uint64_t>(0, kKeys - 1)(rng);
      auto e = (*c)->Lookup(KeyFor(k));
      if (!e.ok()) {
        if (!absl::IsNotFound(e.status())) return kLookupError;
        continue;
      }
      if (e->cubin != CubinFor(k) || e->meta.key != KeyFor(k)) return kForeignBytes;
    }
    if (evicts && n % 25 == 0) {
      if (!(*c)->Evict({.keys = {KeyFor(n)}}).ok()) return kEvictFailed;
    }
  }
  return (*c)->Flush().ok() ? kOk : kPublishFailed;
}

TEST(MultiProcess, TwoWritersAndReadersOnOneDirectoryAgree) {
  TempDir dir;
  {
    auto c = Cache::Open(Options(dir.path()));
    ASSERT_TRUE(c.ok());
  }
  pid_t pids[2];
  for (int id = 0; id < 2; ++id) {
    pids[id] = ::fork();
    if (pids[id] == 0) ::_exit(Worker(dir.path(), id, /*evicts=*/false));
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), kOk);
  }
  auto c = Cache::Open(Options(dir.path()));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Flush().ok());
  for (uint64_t k = 0; k < kKeys; ++k) {
    auto e = (*c)->Lookup(KeyFor(k));
    ASSERT_TRUE(e.ok()) << k << ": " << e.status();
    EXPECT_EQ(e->cubin, CubinFor(k));
  }
  auto report = (*c)->Verify(false);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->ok, kKeys);
  EXPECT_EQ(report->orphan_blobs, 0u) << "the loser of each publish race removes its blob";
  EXPECT_EQ((*c)->Stats()->entries, kKeys);
}

TEST(MultiProcess, EvictionInOneProcessNeverBreaksReadsInTheOther) {
  TempDir dir;
  {
    auto c = Cache::Open(Options(dir.path()));
    ASSERT_TRUE(c.ok());
  }
  pid_t pids[2];
  for (int id = 0; id < 2; ++id) {
    pids[id] = ::fork();
    if (pids[id] == 0) ::_exit(Worker(dir.path(), id, /*evicts=*/id == 1));
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), kOk);
  }
  auto c = Cache::Open(Options(dir.path()));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Flush().ok());
  auto report = (*c)->Verify(false);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->corrupt + report->missing_blobs + report->orphan_blobs, 0u);
}

}  // namespace
}  // namespace jitd::cache
