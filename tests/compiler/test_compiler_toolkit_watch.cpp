// ToolkitWatch and the worker pool's toolkit bracket: a job never runs with
// another toolkit than the one its key names, and a compile that saw the
// toolkit change is discarded, never answered as if nothing happened.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "compiler/toolkit_watch.h"
#include "compiler/worker_pool.h"
#include "test_programs.h"

namespace jitd::compiler {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A stand-in toolkit include directory: what the watch stats and hashes
// (the compiles below use the real toolkit through their -I options).
class ToolkitWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("jitd-toolkit-watch-" + std::to_string(getpid()) + "-" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(include() / "cccl");
    Write(include() / "cuda_fp16.h", "// fp16\n");
    Write(include() / "cccl/cub.cuh", "// cub\n");
  }
  void TearDown() override {
    pool_.reset();
    fs::remove_all(dir_);
  }
  fs::path include() const { return dir_ / "include"; }
  static void Write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::trunc) << text; }

  std::shared_ptr<ToolkitWatch> Watch() {
    ToolkitWatch::Options options;
    options.include_dir = include();
    options.memo_dir = dir_ / "memo";
    options.settle = 0ns;  // the test's writes are seconds apart from nothing; no need to wait
    auto watch = ToolkitWatch::Start(options);
    EXPECT_TRUE(watch.ok()) << watch.status();
    if (!watch.ok()) std::abort();
    return *watch;
  }
  WorkerPool& StartPool(std::shared_ptr<ToolkitWatch> watch, size_t workers = 1) {
    WorkerPool::Options options;
    options.worker_argv = {testing::kWorkerExe};
    options.workers = workers;
    options.scratch_dir = dir_ / "scratch";
    options.toolkit = std::move(watch);
    auto pool = WorkerPool::Start(std::move(options));
    EXPECT_TRUE(pool.ok()) << pool.status();
    if (!pool.ok()) std::abort();
    pool_ = *std::move(pool);
    return *pool_;
  }

  fs::path dir_;
  std::unique_ptr<WorkerPool> pool_;
};

TEST_F(ToolkitWatchTest, IdentityCoversHeadersAndTheNvrtcLibraries) {
  auto watch = Watch();
  const ToolkitIdentity id = watch->identity();
  EXPECT_EQ(id.headers_fingerprint.size(), 64u);
  EXPECT_EQ(id.nvrtc_library_fingerprint.size(), 64u);
  EXPECT_EQ(id.fingerprint.size(), 64u);
  ASSERT_EQ(id.nvrtc_libraries.size(), 3u);
  EXPECT_TRUE(id.nvrtc_libraries[0].filename().string().starts_with("libnvrtc"));
  EXPECT_TRUE(id.nvrtc_libraries[1].filename().string().starts_with("libnvrtc-builtins"));
  EXPECT_TRUE(id.nvrtc_libraries[2].filename().string() == "ptxas");
  // Remembered for the next start (the headers, written just now, only once
  // they are older than the racy window).
  EXPECT_TRUE(fs::exists(dir_ / "memo" / kNvrtcLibrariesMemo));
  auto again = ToolkitIdentity::Compute(include(), dir_ / "memo");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->fingerprint, id.fingerprint);
}

TEST_F(ToolkitWatchTest, AChangedHeaderIsNoticedOnceWithANewFingerprint) {
  auto watch = Watch();
  int calls = 0;
  std::string seen_now, seen_before;
  watch->AddListener([&](const ToolkitIdentity& now, const ToolkitIdentity& before) {
    ++calls;
    seen_now = now.fingerprint;
    seen_before = before.fingerprint;
  });
  auto first = watch->Check();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->epoch, 0u);
  const std::string old = first->fingerprint;
  Write(include() / "cccl/cub.cuh", "// cub 2\n");
  auto second = watch->Check();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->epoch, 1u);
  EXPECT_NE(second->fingerprint, old);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen_before, old);
  EXPECT_EQ(seen_now, second->fingerprint);
  auto third = watch->Check();
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->epoch, 1u) << "no change, no new epoch";
  EXPECT_EQ(calls, 1);
  // Back to the old bytes: the old fingerprint, but a new epoch (a compile
  // across both changes saw something else in between).
  Write(include() / "cccl/cub.cuh", "// cub\n");
  auto fourth = watch->Check();
  ASSERT_TRUE(fourth.ok());
  EXPECT_EQ(fourth->epoch, 2u);
  EXPECT_EQ(fourth->fingerprint, old);
}

TEST_F(ToolkitWatchTest, WithNothingChangedAChecksCostsNoStatPassAndAChangeIsStillSeenAtOnce) {
  auto watch = Watch();
  ASSERT_TRUE(watch->notified()) << "inotify is available here";
  // The watch's own start (the memo directory it made beside the headers)
  // may leave one event: the first Check takes it.
  ASSERT_TRUE(watch->Check().ok());
  const uint64_t passes = watch->stat_passes();
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(watch->Check().ok());
  EXPECT_EQ(watch->stat_passes(), passes) << "no event, no pass";
  // A write is queued by the kernel within the write: the very next Check
  // makes a pass and sees it (no wait, no poll).
  Write(include() / "cccl/cub.cuh", "// cub, edited\n");
  auto changed = watch->Check();
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(changed->epoch, 1u);
  EXPECT_GT(watch->stat_passes(), passes);
  // So are a new header in a new directory (watched once the change is
  // seen) and a rename over a header, as a package upgrade does.
  fs::create_directories(include() / "cccl/new");
  Write(include() / "cccl/new/x.h", "// x\n");
  EXPECT_EQ(watch->Check()->epoch, 2u);
  Write(include() / "cccl/new/x.h", "// x, edited\n");
  EXPECT_EQ(watch->Check()->epoch, 3u);
  Write(dir_ / "replacement.h", "// fp16, new\n");
  fs::rename(dir_ / "replacement.h", include() / "cuda_fp16.h");
  EXPECT_EQ(watch->Check()->epoch, 4u);
}

TEST_F(ToolkitWatchTest, WithoutInotifyEveryCheckIsAStatPass) {
  ToolkitWatch::Options options;
  options.include_dir = include();
  options.settle = 0ns;
  options.full_pass_every = 0ns;
  auto watch = ToolkitWatch::Start(options);
  ASSERT_TRUE(watch.ok()) << watch.status();
  EXPECT_FALSE((*watch)->notified());
  const uint64_t passes = (*watch)->stat_passes();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*watch)->Check().ok());
  EXPECT_EQ((*watch)->stat_passes(), passes + 3);
}

TEST_F(ToolkitWatchTest, AJobKeyedUnderAnotherToolkitIsRefusedNotCompiled) {
  auto watch = Watch();
  WorkerPool& pool = StartPool(watch);
  CompileJob job = testing::TrivialJob();
  job.toolkit_fingerprint = watch->identity().fingerprint;
  auto ok = pool.Compile(job, Priority::kLive);
  ASSERT_TRUE(ok.ok()) << ok.status();
  Write(include() / "cuda_fp16.h", "// fp16, patched\n");
  // The first compile after the change is the one that notices it: its
  // result is discarded.
  auto discarded = pool.Compile(job, Priority::kLive);
  EXPECT_EQ(discarded.status().code(), absl::StatusCode::kUnavailable) << discarded.status();
  EXPECT_NE(discarded.status().message().find("toolkit changed"), std::string_view::npos) << discarded.status();
  EXPECT_TRUE(IsToolkitChange(discarded.status()));
  // From then on a job keyed under the old toolkit is refused before it
  // reaches a worker.
  auto refused = pool.Compile(job, Priority::kLive);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  EXPECT_NE(refused.status().message().find("not compiling"), std::string_view::npos) << refused.status();
  EXPECT_TRUE(IsToolkitChange(refused.status()));
  EXPECT_FALSE(IsToolkitChange(absl::UnavailableError("toolkit changed, but not from the pool")));
  EXPECT_EQ(pool.Stats().compiles, 1u) << "no cubin was answered under the old toolkit";
  EXPECT_EQ(pool.Stats().toolkit_refusals, 2u);
  job.toolkit_fingerprint = watch->identity().fingerprint;  // resolved again, under the new toolkit
  auto again = pool.Compile(job, Priority::kLive);
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST_F(ToolkitWatchTest, ACompileThatSawTheToolkitChangeIsDiscarded) {
  auto watch = Watch();
  WorkerPool& pool = StartPool(watch);
  CompileJob job = testing::CubJob(128);  // about a second inside NVRTC
  job.toolkit_fingerprint = watch->identity().fingerprint;
  auto running = std::async(std::launch::async, [&] { return pool.Compile(job, Priority::kLive); });
  const auto limit = std::chrono::steady_clock::now() + 30s;
  while (pool.Stats().busy_workers == 0 && std::chrono::steady_clock::now() < limit) std::this_thread::yield();
  ASSERT_EQ(pool.Stats().busy_workers, 1u);
  Write(include() / "cccl/cub.cuh", "// cub, upgraded while compiling\n");
  auto result = running.get();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable) << result.status();
  EXPECT_NE(result.status().message().find("discarded"), std::string_view::npos) << result.status();
}

TEST_F(ToolkitWatchTest, WorkersStartedBeforeAChangeAreReplacedBeforeTheirNextJob) {
  auto watch = Watch();
  WorkerPool& pool = StartPool(watch);
  const std::vector<pid_t> before = pool.WorkerPids();
  Write(include() / "cuda_fp16.h", "// fp16, patched\n");
  ASSERT_TRUE(watch->Check().ok());
  CompileJob job = testing::TrivialJob();
  job.toolkit_fingerprint = watch->identity().fingerprint;
  auto result = pool.Compile(job, Priority::kLive);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_NE(pool.WorkerPids(), before) << "the worker that predates the change did not compile";
}

TEST_F(ToolkitWatchTest, RestartWorkersReplacesIdleWorkers) {
  WorkerPool& pool = StartPool(nullptr, 2);
  const std::vector<pid_t> before = pool.WorkerPids();
  pool.RestartWorkers();
  const auto limit = std::chrono::steady_clock::now() + 30s;
  auto replaced = [&] {
    const std::vector<pid_t> now = pool.WorkerPids();
    if (now.size() != 2) return false;
    for (pid_t pid : now) {
      if (std::find(before.begin(), before.end(), pid) != before.end()) return false;
    }
    return true;
  };
  while (!replaced() && std::chrono::steady_clock::now() < limit) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(replaced());
  EXPECT_TRUE(pool.Compile(testing::TrivialJob(), Priority::kLive).ok());
}

}  // namespace
}  // namespace jitd::compiler
