// Two processes on one cache directory at once (a daemon and an offline
// warm-up writer): both publish overlapping keys with different bytes, both
// read, one evicts. No errors, no torn or foreign reads, no lost entries.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <random>
#include <thread>

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

// Creates the cache in `dir`, for the processes that then share it.
void CreateCache(const std::filesystem::path& dir) {
  auto c = Cache::Open(Options(dir));
  ASSERT_TRUE(c.ok());
}

// Waits for the child process `pid`, which must exit with kOk.
void WaitForOk(pid_t pid) {
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), kOk);
}

// Workers 0 and 1 at once, each in a child process, on a new cache in
// `dir` (worker 1 evicting when `second_evicts`); both must succeed.
void RunTwoWorkers(const std::filesystem::path& dir, bool second_evicts) {
  ASSERT_NO_FATAL_FAILURE(CreateCache(dir));
  pid_t pids[2];
  for (int id = 0; id < 2; ++id) {
    pids[id] = ::fork();
    if (pids[id] == 0) ::_exit(Worker(dir, id, /*evicts=*/second_evicts && id == 1));
  }
  for (pid_t pid : pids) ASSERT_NO_FATAL_FAILURE(WaitForOk(pid));
}

TEST(MultiProcess, TwoWritersAndReadersOnOneDirectoryAgree) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(RunTwoWorkers(dir.path(), /*second_evicts=*/false));
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
  ASSERT_NO_FATAL_FAILURE(RunTwoWorkers(dir.path(), /*second_evicts=*/true));
  auto c = Cache::Open(Options(dir.path()));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Flush().ok());
  auto report = (*c)->Verify(false);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->corrupt + report->missing_blobs + report->orphan_blobs, 0u);
}

// How long the churn test runs: a few seconds in CI, longer by hand
// (JITD_CHURN_SECONDS=45 reproduces the length of the field report).
std::chrono::seconds ChurnDuration() {
  const char* env = std::getenv("JITD_CHURN_SECONDS");
  return std::chrono::seconds(env != nullptr ? std::max(1, std::atoi(env)) : 3);
}

// One process of the churn: publishes a rotating window of keys, evicts by
// key and by budget, and reads what it published last (a live entry whose
// blob a repair removed would read as missing: corrupt).
int Churner(const std::filesystem::path& dir, std::chrono::steady_clock::time_point until) {
  CacheOptions o = Options(dir, /*max_bytes=*/40 * 4400);
  o.background = true;
  o.flush_interval = std::chrono::milliseconds(5);
  auto c = Cache::Open(o);
  if (!c.ok()) return kOpenFailed;
  for (uint64_t n = 0; std::chrono::steady_clock::now() < until; ++n) {
    if (!(*c)->Publish(MetaFor(n), CubinFor(n)).ok()) return kPublishFailed;
    auto e = (*c)->Lookup(KeyFor(n));
    if (!e.ok() && !absl::IsNotFound(e.status())) return kLookupError;
    if (e.ok() && e->cubin != CubinFor(n)) return kForeignBytes;
    if (n % 7 == 0 && n >= 7) {
      if (!(*c)->Evict({.keys = {KeyFor(n - 7), KeyFor(n - 5)}}).ok()) return kEvictFailed;
    }
    // An entry is published again after its eviction, with other bytes
    // (another created time): the same key, a new blob.
    if (n % 11 == 0 && n >= 22) (void)(*c)->Publish(MetaFor(n - 22), CubinFor(n - 22));
  }
  return (*c)->Flush().ok() ? kOk : kPublishFailed;
}

// verify --repair looped while another process evicts and publishes, and
// the directory opened again and again (each open reconciles, as
// `jitd warm` does): a blob being deleted is never indexed again and then
// reported corrupt, and a live blob is never removed as the loser of a
// publish race.
TEST(MultiProcess, RepairLoopedDuringEvictionChurnFindsNothingAndRemovesNothingLive) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(CreateCache(dir.path()));
  const auto until = std::chrono::steady_clock::now() + ChurnDuration();
  pid_t churner = ::fork();
  if (churner == 0) ::_exit(Churner(dir.path(), until));
  uint64_t verifies = 0, false_corrupt = 0, false_missing = 0, repaired = 0;
  std::vector<std::string> problems;
  while (std::chrono::steady_clock::now() < until) {
    CacheOptions o = Options(dir.path());
    o.background = false;
    auto c = Cache::Open(o);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE((*c)->Flush().ok());  // the reconcile an open schedules
    for (int i = 0; i < 5; ++i) {
      auto report = (*c)->Verify(/*repair=*/true);
      ASSERT_TRUE(report.ok()) << report.status();
      ++verifies;
      false_corrupt += report->corrupt;
      false_missing += report->missing_blobs;
      repaired += report->repaired;
      for (const auto& p : report->problems) problems.push_back(p);
    }
  }
  ASSERT_NO_FATAL_FAILURE(WaitForOk(churner));
  std::cout << "[churn] " << verifies << " verify --repair runs beside eviction churn: " << false_corrupt
            << " corrupt, " << false_missing << " missing, " << repaired << " repaired\n";
  EXPECT_GT(verifies, 10u);
  EXPECT_EQ(false_corrupt, 0u);
  EXPECT_EQ(false_missing, 0u);
  // Orphans may be reported: a publish between its rename and its row is
  // one, and adopting it is right. Corrupt or missing ones are not.
  for (const auto& p : problems) {
    EXPECT_EQ(p.find("corrupt"), std::string::npos) << p;
    EXPECT_EQ(p.find("missing"), std::string::npos) << p;
  }

  auto c = Cache::Open(Options(dir.path()));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Flush().ok());
  auto report = (*c)->Verify(false);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->corrupt + report->missing_blobs + report->orphan_blobs, 0u);
  // Cumulative over both processes: no lookup ever found a live entry's
  // blob gone, and no reconcile dropped one.
  EXPECT_EQ((*c)->Stats()->corrupt, 0u);
}

}  // namespace
}  // namespace jitd::cache
