// WorkerPool with real jitd-compile-worker processes and real NVRTC
// compiles. Waits are on conditions (the pool's counters, a future) with
// generous bounds, never fixed sleeps.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "compiler/nvrtc_program.h"
#include "compiler/worker_pool.h"
#include "test_programs.h"

namespace jitd::compiler {
namespace {

using namespace std::chrono_literals;
using testing::CubJob;
using testing::HasElfMagic;
using testing::TrivialJob;
using Clock = std::chrono::steady_clock;
using Result = absl::StatusOr<CompileResult>;

// Bounds for waits that normally take milliseconds to a few seconds; only
// a hang reaches them.
constexpr auto kWaitLimit = 60s;

bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds limit = kWaitLimit) {
  const auto deadline = Clock::now() + limit;
  while (!condition()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);  // polling interval, not a wait for an event
  }
  return true;
}

// True once `pid` has fully died (a zombie or gone). A worker has two
// threads: its main thread turns zombie first while the other may still
// hold the process's descriptors, so a zombie counts only once it is the
// last task left (then its socket is closed and the pool sees EOF).
bool IsDead(pid_t pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  std::ifstream stat(proc + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'Z') return false;
  std::error_code ec;
  const auto tasks =
      std::distance(std::filesystem::directory_iterator(proc + "/task", ec), std::filesystem::directory_iterator());
  return ec || tasks <= 1;
}

// CPU time `pid` has used, in seconds (0 if it is gone).
double CpuSeconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return 0;
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  // After "pid (comm) ": state is field 3; utime and stime are fields 14 and 15.
  for (int index = 3; index <= 15 && fields >> field; ++index) {
    if (index >= 14) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU seconds the whole machine has spent busy (not idle) since boot.
double MachineBusySeconds() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  stat >> cpu;  // the "cpu" line: user nice system idle iowait irq softirq steal ...
  double busy = 0;
  double value = 0;
  for (int index = 0; index < 8 && stat >> value; ++index) {
    if (index != 3 && index != 4) busy += value;
  }
  return busy / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

class WorkerPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ =
        std::filesystem::path(::testing::TempDir()) / ("jitd-pool-" + std::to_string(getpid()) + "-" +
                                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override {
    pool_.reset();
    std::filesystem::remove_all(scratch_);
  }

  WorkerPool::Options PoolOptions(size_t workers) {
    WorkerPool::Options options;
    options.worker_argv = {testing::kWorkerExe};
    options.workers = workers;
    options.scratch_dir = scratch_;
    return options;
  }
  WorkerPool& StartPool(WorkerPool::Options options) {
    absl::StatusOr<std::unique_ptr<WorkerPool>> pool = WorkerPool::Start(std::move(options));
    EXPECT_TRUE(pool.ok()) << pool.status();
    if (!pool.ok()) std::abort();
    pool_ = *std::move(pool);
    return *pool_;
  }
  WorkerPool& StartPool(size_t workers) { return StartPool(PoolOptions(workers)); }

  std::future<Result> CompileAsync(CompileJob job, Priority priority = Priority::kLive,
                                   std::shared_ptr<CancelFlag> cancel = nullptr) {
    return std::async(std::launch::async,
                      [this, job = std::move(job), priority, cancel] { return pool_->Compile(job, priority, cancel); });
  }
  // Waits until `n` workers have a job sent to them.
  void WaitBusy(size_t n) {
    ASSERT_TRUE(WaitFor([&] { return pool_->Stats().busy_workers == n; })) << "never saw " << n << " busy workers";
  }
  // Waits until `worker` is inside NVRTC (it has burnt CPU on the compile,
  // not merely received it): a cancel then goes through NVRTC's callback.
  void WaitCompiling(pid_t worker) {
    const double before = CpuSeconds(worker);
    ASSERT_TRUE(WaitFor([&] { return CpuSeconds(worker) > before + 0.2; })) << "worker never started compiling";
  }
  void WaitQueued(size_t n) {
    ASSERT_TRUE(WaitFor([&] { return pool_->Stats().queue_depth == n; })) << "never saw " << n << " queued jobs";
  }

  std::filesystem::path scratch_;
  std::unique_ptr<WorkerPool> pool_;
};

Result Get(std::future<Result>& future) {
  if (future.wait_for(kWaitLimit) != std::future_status::ready) {
    ADD_FAILURE() << "compile did not return within " << kWaitLimit.count() << " s";
    return absl::DeadlineExceededError("test wait limit");
  }
  return future.get();
}

TEST_F(WorkerPoolTest, CompilesInAWorkerProcess) {
  WorkerPool& pool = StartPool(1);
  EXPECT_EQ(pool.size(), 1u);
  ASSERT_EQ(pool.WorkerPids().size(), 1u);
  EXPECT_NE(pool.WorkerPids()[0], getpid());

  Result result = pool.Compile(TrivialJob(), Priority::kLive);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(HasElfMagic(result->cubin));
  ASSERT_EQ(result->lowered_names.size(), 2u);
  EXPECT_FALSE(result->lowered_names[0].second.empty());
  EXPECT_NE(result->lowered_names[0].second, result->lowered_names[1].second);

  Result reference = CompileInProcess(TrivialJob(), nullptr, nullptr);
  ASSERT_TRUE(reference.ok());
  EXPECT_EQ(result->cubin, reference->cubin);
  EXPECT_EQ(result->lowered_names, reference->lowered_names);
  const WorkerPool::Statistics stats = pool.Stats();
  EXPECT_EQ(stats.compiles, 1u);
  EXPECT_EQ(stats.workers, 1u);
  EXPECT_EQ(stats.busy_workers, 0u);
}

TEST_F(WorkerPoolTest, SyntaxErrorIsFailedPreconditionWithTheNvrtcLog) {
  WorkerPool& pool = StartPool(1);
  CompileJob job = TrivialJob();
  job.source = "namespace sglang { __global__ void broken(float* x) { x[0] = 1 } }";
  job.name_expressions = {"sglang::broken"};
  Result result = pool.Compile(job, Priority::kLive);
  ASSERT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition) << result.status();
  EXPECT_NE(result.status().message().find("expected a \";\""), absl::string_view::npos) << result.status();
  EXPECT_NE(NvrtcLogOf(result.status()).value_or("").find("expected a \";\""), std::string::npos);
  EXPECT_EQ(pool.Stats().failures, 1u);
  EXPECT_EQ(pool.Stats().restarts, 0u);  // a compile error is not a worker failure
}

TEST_F(WorkerPoolTest, WorkerKilledMidCompileGivesUnavailableAndIsReplaced) {
  WorkerPool& pool = StartPool(1);
  const pid_t victim = pool.WorkerPids().at(0);
  auto pending = CompileAsync(CubJob(128));
  WaitBusy(1);
  const auto killed_at = Clock::now();
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  Result result = Get(pending);
  const double seconds = Seconds(Clock::now() - killed_at);

  ASSERT_EQ(result.status().code(), absl::StatusCode::kUnavailable) << result.status();
  const std::string message(result.status().message());
  EXPECT_NE(message.find("compile worker (pid " + std::to_string(victim) + ") died with signal 9"), std::string::npos)
      << message;
  EXPECT_NE(message.find("while compiling tests/cub_block_sum.cu; it has been replaced"), std::string::npos) << message;
  EXPECT_LT(seconds, 5.0) << "the caller waited " << seconds << " s after the kill";

  ASSERT_EQ(pool.WorkerPids().size(), 1u);
  EXPECT_NE(pool.WorkerPids()[0], victim);
  Result next = pool.Compile(TrivialJob(), Priority::kLive);
  EXPECT_TRUE(next.ok()) << next.status();
  const WorkerPool::Statistics stats = pool.Stats();
  EXPECT_EQ(stats.crashes, 1u);
  EXPECT_EQ(stats.restarts, 1u);
}

TEST_F(WorkerPoolTest, WorkerThatDiedIdleIsReplacedBeforeTheNextJob) {
  WorkerPool& pool = StartPool(1);
  const pid_t victim = pool.WorkerPids().at(0);
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] { return IsDead(victim); }));
  Result result = pool.Compile(TrivialJob(), Priority::kLive);
  EXPECT_TRUE(result.ok()) << result.status();
  EXPECT_NE(pool.WorkerPids().at(0), victim);
  EXPECT_EQ(pool.Stats().restarts, 1u);
  EXPECT_EQ(pool.Stats().crashes, 0u);
}

TEST_F(WorkerPoolTest, TimeoutGivesDeadlineExceededAndReplacesTheWorker) {
  WorkerPool& pool = StartPool(1);
  const pid_t slow = pool.WorkerPids().at(0);
  CompileJob job = CubJob(128);
  job.timeout = 200ms;  // the CUB compile takes about a second
  Result result = pool.Compile(job, Priority::kLive);
  ASSERT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded) << result.status();
  EXPECT_NE(result.status().message().find("200 ms"), absl::string_view::npos) << result.status();
  EXPECT_TRUE(IsDead(slow));
  EXPECT_NE(pool.WorkerPids().at(0), slow);
  Result next = pool.Compile(TrivialJob(), Priority::kLive);
  EXPECT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(pool.Stats().timeouts, 1u);
  EXPECT_EQ(pool.Stats().restarts, 1u);
}

TEST_F(WorkerPoolTest, CancelledQueuedJobIsDroppedWithoutRunning) {
  WorkerPool& pool = StartPool(1);
  auto occupying = CompileAsync(CubJob(128));
  WaitBusy(1);
  auto cancel = std::make_shared<CancelFlag>();
  auto queued = CompileAsync(TrivialJob(), Priority::kLive, cancel);
  WaitQueued(1);
  const auto cancelled_at = Clock::now();
  cancel->Cancel();
  Result result = Get(queued);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled) << result.status();
  EXPECT_LT(Seconds(Clock::now() - cancelled_at), 1.0);
  EXPECT_EQ(pool.Stats().queue_depth, 0u);
  EXPECT_TRUE(Get(occupying).ok());
  const WorkerPool::Statistics stats = pool.Stats();
  EXPECT_EQ(stats.compiles, 1u);  // only the occupying job ran
  EXPECT_EQ(stats.cancellations, 1u);
}

TEST_F(WorkerPoolTest, CancelledRunningJobIsAnsweredAtOnce) {
  WorkerPool::Options options = PoolOptions(1);
  options.cancel_grace = 100ms;  // shorter than CUB's front end: the worker is killed
  WorkerPool& pool = StartPool(std::move(options));
  auto cancel = std::make_shared<CancelFlag>();
  const pid_t worker = pool.WorkerPids().at(0);
  auto running = CompileAsync(CubJob(128), Priority::kLive, cancel);
  WaitBusy(1);
  WaitCompiling(worker);
  const auto cancelled_at = Clock::now();
  cancel->Cancel();
  Result result = Get(running);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled) << result.status();
  EXPECT_LT(Seconds(Clock::now() - cancelled_at), 1.0);
  // The pool is usable afterwards, whether the worker stopped or was replaced.
  Result next = pool.Compile(TrivialJob(), Priority::kLive);
  EXPECT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(pool.Stats().cancellations, 1u);
}

TEST_F(WorkerPoolTest, CancelHonouredWithinTheGraceKeepsTheWorker) {
  WorkerPool::Options options = PoolOptions(1);
  options.cancel_grace = 30s;  // NVRTC checks its cancel flag after the front end
  WorkerPool& pool = StartPool(std::move(options));
  const pid_t worker = pool.WorkerPids().at(0);
  auto cancel = std::make_shared<CancelFlag>();
  auto running = CompileAsync(CubJob(128), Priority::kLive, cancel);
  WaitBusy(1);
  WaitCompiling(worker);
  cancel->Cancel();
  const auto cancelled_at = Clock::now();
  EXPECT_EQ(Get(running).status().code(), absl::StatusCode::kCancelled);
  EXPECT_LT(Seconds(Clock::now() - cancelled_at), 1.0);  // the caller does not wait for NVRTC
  WaitBusy(0);  // the worker answered the cancel: NVRTC stopped after its front end
  std::printf("the worker stopped %.2f s after the cancel\n", Seconds(Clock::now() - cancelled_at));
  EXPECT_EQ(pool.WorkerPids().at(0), worker);
  EXPECT_EQ(pool.Stats().restarts, 0u);
  EXPECT_TRUE(pool.Compile(TrivialJob(), Priority::kLive).ok());
}

TEST_F(WorkerPoolTest, FullQueueRejectsWithResourceExhausted) {
  WorkerPool::Options options = PoolOptions(1);
  options.max_queue = 1;
  WorkerPool& pool = StartPool(std::move(options));
  auto occupying = CompileAsync(CubJob(128));
  WaitBusy(1);
  auto waiting = CompileAsync(TrivialJob(), Priority::kWarm);
  WaitQueued(1);
  Result rejected = pool.Compile(TrivialJob(), Priority::kLive);
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kResourceExhausted) << rejected.status();
  EXPECT_TRUE(Get(occupying).ok());
  EXPECT_TRUE(Get(waiting).ok());
  EXPECT_EQ(pool.Stats().rejected, 1u);
}

// WorkerPool::CompileAsync: the result arrives through its callback, on
// the pool's completion thread, with no caller thread waiting.
std::future<Result> Callback(WorkerPool& pool, CompileJob job, Priority priority = Priority::kLive,
                             std::shared_ptr<CancelFlag> cancel = nullptr, std::thread::id* called_on = nullptr) {
  auto promise = std::make_shared<std::promise<Result>>();
  std::future<Result> future = promise->get_future();
  pool.CompileAsync(std::move(job), priority, std::move(cancel), [promise, called_on](Result result) {
    if (called_on != nullptr) *called_on = std::this_thread::get_id();
    promise->set_value(std::move(result));
  });
  return future;
}

TEST_F(WorkerPoolTest, CompileAsyncAnswersThroughItsCallbackOffTheCallersThread) {
  WorkerPool& pool = StartPool(1);
  std::thread::id called_on;
  auto future = Callback(pool, TrivialJob(), Priority::kLive, nullptr, &called_on);
  Result result = Get(future);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(HasElfMagic(result->cubin));
  EXPECT_NE(called_on, std::this_thread::get_id());
  Result reference = pool.Compile(TrivialJob(), Priority::kLive);
  ASSERT_TRUE(reference.ok());
  EXPECT_EQ(result->cubin, reference->cubin) << "the same compile as the blocking call";
}

TEST_F(WorkerPoolTest, CompileAsyncIsRefusedOnAFullQueueAndCancelledWhileQueued) {
  WorkerPool::Options options = PoolOptions(1);
  options.max_queue = 1;
  WorkerPool& pool = StartPool(std::move(options));
  auto occupying = Callback(pool, CubJob(128));
  WaitBusy(1);
  auto cancel = std::make_shared<CancelFlag>();
  auto queued = Callback(pool, TrivialJob(), Priority::kLive, cancel);
  WaitQueued(1);
  auto refused = Callback(pool, TrivialJob());
  EXPECT_EQ(Get(refused).status().code(), absl::StatusCode::kResourceExhausted);
  cancel->Cancel();
  EXPECT_EQ(Get(queued).status().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(Get(occupying).ok());
  EXPECT_EQ(pool.Stats().rejected, 1u);
}

TEST_F(WorkerPoolTest, CompileAsyncCallbacksAllRunBeforeTheDestructorReturns) {
  WorkerPool& pool = StartPool(1);
  std::atomic<int> called{0};
  for (int i = 0; i < 4; ++i) {
    pool.CompileAsync(TrivialJob(), Priority::kWarm, nullptr, [&](Result) { ++called; });
  }
  pool_.reset();
  EXPECT_EQ(called.load(), 4) << "every job answered, compiled or refused by the shutdown";
}

TEST_F(WorkerPoolTest, LiveJobsOvertakeQueuedWarmJobs) {
  StartPool(1);
  std::mutex mu;
  std::vector<std::string> finished;
  auto tracked = [&](CompileJob job, Priority priority, std::string name) {
    return std::async(std::launch::async, [&, job = std::move(job), priority, name] {
      Result result = pool_->Compile(job, priority);
      std::lock_guard lock(mu);
      finished.push_back(name);
      return result;
    });
  };
  auto occupying = tracked(CubJob(128), Priority::kLive, "occupying");
  WaitBusy(1);
  auto warm = tracked(TrivialJob(), Priority::kWarm, "warm");
  WaitQueued(1);
  auto live = tracked(TrivialJob(), Priority::kLive, "live");
  WaitQueued(2);
  EXPECT_TRUE(Get(occupying).ok());
  EXPECT_TRUE(Get(warm).ok());
  EXPECT_TRUE(Get(live).ok());
  EXPECT_EQ(finished, (std::vector<std::string>{"occupying", "live", "warm"}));
}

TEST_F(WorkerPoolTest, TwoWorkersCompileInParallel) {
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores < 2) GTEST_SKIP() << "needs 2 cores to show parallelism; this machine has " << cores;
  WorkerPool& pool = StartPool(2);
  // One CUB compile in each worker first: a worker's first big compile also
  // pays for growing NVRTC's heap, which would flatter the parallel run.
  auto warm_a = CompileAsync(CubJob(64));
  auto warm_b = CompileAsync(CubJob(32));
  WaitBusy(2);
  ASSERT_TRUE(Get(warm_a).ok() && Get(warm_b).ok());
  const std::vector<pid_t> workers = pool.WorkerPids();
  ASSERT_EQ(workers.size(), 2u);

  // Wall time on a shared machine is noisy: the best of three attempts
  // counts, and attempts during which other processes took CPU are noted.
  std::string attempts;
  bool uncontended_attempt = false;
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto start = Clock::now();
    ASSERT_TRUE(pool.Compile(CubJob(128), Priority::kLive).ok());
    const double single = Seconds(Clock::now() - start);

    const double busy_before = MachineBusySeconds();
    const double workers_before = CpuSeconds(workers[0]) + CpuSeconds(workers[1]);
    start = Clock::now();
    auto a = CompileAsync(CubJob(128));
    auto b = CompileAsync(CubJob(256));
    WaitBusy(2);  // both compiles run at once, whatever the clock says
    ASSERT_TRUE(Get(a).ok() && Get(b).ok());
    const double both = Seconds(Clock::now() - start);
    const double others =
        (MachineBusySeconds() - busy_before - (CpuSeconds(workers[0]) + CpuSeconds(workers[1]) - workers_before)) /
        both;

    char line[160];
    std::snprintf(line, sizeof(line), " [single %.2f s, two in parallel %.2f s (%.2fx), other load %.1f cores]", single,
                  both, both / single, others);
    attempts += line;
    if (both < 1.6 * single) {
      std::printf("parallel:%s\n", attempts.c_str());
      RecordProperty("parallel_over_single", std::to_string(both / single));
      return;
    }
    // Half a core taken by others already hides the second worker's gain.
    uncontended_attempt = uncontended_attempt || others < 0.5;
  }
  if (!uncontended_attempt) GTEST_SKIP() << "other processes kept the CPUs busy; cannot judge:" << attempts;
  ADD_FAILURE() << "two compiles on two workers were not clearly parallel:" << attempts;
}

TEST_F(WorkerPoolTest, SecondInstantiationReusesThePchWithIdenticalCubin) {
  WorkerPool& pool = StartPool(1);
  Result first = pool.Compile(CubJob(128, /*use_pch=*/true), Priority::kLive);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->used_pch);  // this one created it
  Result second = pool.Compile(CubJob(256, /*use_pch=*/true), Priority::kLive);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->used_pch);

  Result reference = CompileInProcess(CubJob(256), nullptr, nullptr);
  ASSERT_TRUE(reference.ok()) << reference.status();
  EXPECT_FALSE(reference->used_pch);
  EXPECT_EQ(second->cubin, reference->cubin);
  EXPECT_EQ(second->lowered_names, reference->lowered_names);
  EXPECT_EQ(second->log, reference->log);  // NVRTC's PCH messages are not in the log
  // 0.2-0.3 s against ~1 s when measured alone; generous for a shared machine.
  // A burst of other load during one compile can still eat the margin, so
  // up to two more instantiations are timed the same way (each with the PCH
  // and without): one clearly faster pair shows the reuse.
  std::string timings;
  double best = 1e9;
  for (int threads : {256, 512, 1024}) {
    Result with = threads == 256 ? std::move(second) : pool.Compile(CubJob(threads, /*use_pch=*/true), Priority::kLive);
    Result without = threads == 256 ? std::move(reference) : CompileInProcess(CubJob(threads), nullptr, nullptr);
    ASSERT_TRUE(with.ok() && without.ok()) << with.status() << " / " << without.status();
    EXPECT_TRUE(with->used_pch);
    char line[120];
    std::snprintf(line, sizeof(line), " [%d threads: reuse %.0f ms, no PCH %.0f ms]", threads, with->compile_ms,
                  without->compile_ms);
    timings += line;
    best = std::min(best, with->compile_ms / without->compile_ms);
    if (best < 0.8) break;
  }
  std::printf("PCH: create %.0f ms;%s\n", first->compile_ms, timings.c_str());
  EXPECT_LT(best, 0.8) << "with the PCH never clearly faster than without:" << timings;
}

TEST_F(WorkerPoolTest, DestructorReapsEveryWorker) {
  StartPool(2);
  const std::vector<pid_t> pids = pool_->WorkerPids();
  ASSERT_EQ(pids.size(), 2u);
  pool_.reset();
  for (pid_t pid : pids) {
    errno = 0;
    EXPECT_EQ(kill(pid, 0), -1) << "worker " << pid << " still exists (running or a zombie)";
    EXPECT_EQ(errno, ESRCH);
  }
}

TEST_F(WorkerPoolTest, StartFailsForAProgramThatIsNotAWorker) {
  WorkerPool::Options options = PoolOptions(1);
  options.worker_argv = {"/bin/sh", "-c", "exec cat <&3 >&3", "sh"};  // echoes the hello back
  absl::StatusOr<std::unique_ptr<WorkerPool>> pool = WorkerPool::Start(options);
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kUnavailable) << pool.status();
}

TEST_F(WorkerPoolTest, StartFailsForAMissingExecutable) {
  WorkerPool::Options options = PoolOptions(1);
  options.worker_argv = {(scratch_ / "no-such-worker").string()};
  absl::StatusOr<std::unique_ptr<WorkerPool>> pool = WorkerPool::Start(options);
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kUnavailable) << pool.status();
}

TEST_F(WorkerPoolTest, StartFailsWhenAWorkerNeverAnswers) {
  WorkerPool::Options options = PoolOptions(1);
  options.worker_argv = {"/bin/sh", "-c", "exec sleep 60", "sh"};
  options.start_timeout = 300ms;
  const auto start = Clock::now();
  absl::StatusOr<std::unique_ptr<WorkerPool>> pool = WorkerPool::Start(options);
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kDeadlineExceeded) << pool.status();
  EXPECT_LT(Seconds(Clock::now() - start), 10.0);
}

}  // namespace
}  // namespace jitd::compiler
