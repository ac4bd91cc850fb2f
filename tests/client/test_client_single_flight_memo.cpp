// The client's memo: a second request costs nothing, concurrent first
// requests produce once, errors and unkept answers are asked for again.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "single_flight_memo.h"

namespace jitd::client_detail {
namespace {

using Memo = SingleFlightMemo<std::string>;

Memo::Produced Value(const std::string& text, bool keep = true) {
  return {std::make_shared<const std::string>(text), keep};
}

TEST(SingleFlightMemo, SecondGetReturnsTheSameObjectWithoutProducing) {
  Memo memo;
  int calls = 0;
  bool produced = false;
  auto first = memo.Get(
      "k",
      [&] {
        ++calls;
        return Value("v");
      },
      &produced);
  EXPECT_TRUE(produced);
  auto second = memo.Get(
      "k",
      [&] {
        ++calls;
        return Value("other");
      },
      &produced);
  EXPECT_FALSE(produced);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->get(), second->get());
  EXPECT_EQ(**second, "v");
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(memo.size(), 1u);
}

TEST(SingleFlightMemo, KeysAreIndependent) {
  Memo memo;
  EXPECT_EQ(**memo.Get("a", [] { return Value("A"); }), "A");
  EXPECT_EQ(**memo.Get("b", [] { return Value("B"); }), "B");
  EXPECT_EQ(memo.size(), 2u);
}

TEST(SingleFlightMemo, ErrorsAreReturnedButNotRemembered) {
  Memo memo;
  int calls = 0;
  auto failed = memo.Get("k", [&]() -> Memo::Produced {
    ++calls;
    return {absl::UnavailableError("daemon away"), true};
  });
  EXPECT_TRUE(absl::IsUnavailable(failed.status()));
  auto retried = memo.Get("k", [&] {
    ++calls;
    return Value("v");
  });
  ASSERT_TRUE(retried.ok());
  EXPECT_EQ(calls, 2);
}

TEST(SingleFlightMemo, UnkeptAnswersAreProducedAgain) {
  Memo memo;
  int calls = 0;
  EXPECT_TRUE(memo.Get("k",
                       [&] {
                         ++calls;
                         return Value("from the fallback", /*keep=*/false);
                       })
                  .ok());
  EXPECT_TRUE(memo.Get("k",
                       [&] {
                         ++calls;
                         return Value("from the daemon");
                       })
                  .ok());
  EXPECT_EQ(**memo.Get("k",
                       [&] {
                         ++calls;
                         return Value("never");
                       }),
            "from the daemon");
  EXPECT_EQ(calls, 2);
}

TEST(SingleFlightMemo, ConcurrentFirstGetsProduceOnce) {
  Memo memo;
  std::atomic<int> calls{0};
  std::atomic<bool> release{false};
  std::vector<std::thread> threads;
  std::vector<std::string> seen(16);
  for (size_t t = 0; t < seen.size(); ++t) {
    threads.emplace_back([&, t] {
      auto value = memo.Get("k", [&] {
        ++calls;
        while (!release) std::this_thread::yield();  // hold the flight open
        return Value("v");
      });
      seen[t] = value.ok() ? **value : "error";
    });
  }
  // Let every thread reach the memo while the first one produces.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  release = true;
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(calls, 1);
  for (const std::string& value : seen) EXPECT_EQ(value, "v");
}

TEST(SingleFlightMemo, WaitersShareTheProducersError) {
  Memo memo;
  std::atomic<int> calls{0};
  std::atomic<bool> release{false};
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      auto value = memo.Get("k", [&]() -> Memo::Produced {
        ++calls;
        while (!release) std::this_thread::yield();
        return {absl::NotFoundError("no such kernel"), true};
      });
      if (absl::IsNotFound(value.status())) ++errors;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  release = true;
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(errors, 8);
  EXPECT_LE(calls, 8);
  EXPECT_EQ(memo.size(), 0u);
}

TEST(SingleFlightMemo, FindAndRememberKeepTheFirstValue) {
  Memo memo;
  EXPECT_EQ(memo.Find("k"), nullptr);
  memo.Remember("k", std::make_shared<const std::string>("first"));
  memo.Remember("k", std::make_shared<const std::string>("second"));
  ASSERT_NE(memo.Find("k"), nullptr);
  EXPECT_EQ(*memo.Find("k"), "first");
}

}  // namespace
}  // namespace jitd::client_detail
