// Executor: tasks run on its threads, delayed ones after their delay and
// in due order, and every task runs before destruction returns.
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <mutex>
#include <vector>

#include "serving/executor.h"

namespace jitd::serving {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(Executor, RunsPostedTasksOnItsOwnThreads) {
  Executor executor(2);
  std::latch done(10);
  std::atomic<int> on_caller{0};
  const auto caller = std::this_thread::get_id();
  for (int i = 0; i < 10; ++i) {
    executor.Post([&] {
      on_caller += std::this_thread::get_id() == caller;
      done.count_down();
    });
  }
  done.wait();
  EXPECT_EQ(on_caller.load(), 0);
}

TEST(Executor, ADelayedTaskWaitsItsDelayWithoutHoldingUpOthers) {
  Executor executor(1);
  const auto start = Clock::now();
  std::latch done(2);
  Clock::time_point delayed_at, immediate_at;
  // Due well after the next Post, even if this thread stalls between them.
  executor.PostAfter(500ms, [&] {
    delayed_at = Clock::now();
    done.count_down();
  });
  executor.Post([&] {
    immediate_at = Clock::now();
    done.count_down();
  });
  done.wait();
  EXPECT_GE(delayed_at - start, 500ms);
  EXPECT_LT(immediate_at, delayed_at) << "one thread, yet the later-posted task ran first";
}

// Idle threads all wait for the first delayed task's due time; when it
// comes, one of them runs the task (erasing it from the queue) while the
// others wake too. Those must not read the due time from the erased task
// (AddressSanitizer: heap-use-after-free in Executor::Run).
TEST(Executor, ThreadsWaitingForTheSameDelayedTaskOutliveIt) {
  Executor executor(4);
  constexpr int kTasks = 200;
  std::latch done(kTasks);
  for (int i = 0; i < kTasks; ++i) executor.PostAfter(std::chrono::milliseconds(1 + i % 5), [&] { done.count_down(); });
  done.wait();
}

TEST(Executor, DestructionRunsEveryQueuedTaskDelayedOnesAtOnce) {
  std::atomic<int> ran{0};
  const auto start = Clock::now();
  {
    Executor executor(2);
    for (int i = 0; i < 5; ++i) executor.PostAfter(1h, [&] { ++ran; });
    for (int i = 0; i < 5; ++i) executor.Post([&] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 10);
  EXPECT_LT(Clock::now() - start, 30s);
}

TEST(Executor, ATaskMayPostAnother) {
  std::atomic<int> ran{0};
  {
    Executor executor(1);
    executor.Post([&] {
      ++ran;
      executor.PostAfter(1ms, [&] { ++ran; });
    });
  }
  EXPECT_EQ(ran.load(), 2);
}

}  // namespace
}  // namespace jitd::serving
