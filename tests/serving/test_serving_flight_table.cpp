// FlightTable alone: single flight, the roles Join gives, cancellation by
// the last waiter, PREFETCH keeping a flight wanted, the negative memo.
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <thread>
#include <vector>

#include "serving/flight_table.h"

namespace jitd::serving {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Joined = FlightTable::Joined;

FlightTable Table(std::chrono::seconds ttl = 30s) { return FlightTable(FlightTable::Options{ttl, 4, 5ms}); }

std::shared_ptr<const cache::Entry> EntryFor(const std::string& key) {
  auto e = std::make_shared<cache::Entry>();
  e->meta.key = key;
  e->cubin = "cubin of " + key;
  return e;
}

TEST(FlightTable, TheFirstRequestLeadsAndTheNextOnesFollowTheSameFlight) {
  FlightTable table = Table();
  auto lead = table.Join("k", Mode::kCompile, {});
  ASSERT_EQ(lead.kind, Joined::kLeader);
  auto follow = table.Join("k", Mode::kCompile, {});
  ASSERT_EQ(follow.kind, Joined::kFollower);
  EXPECT_EQ(follow.flight, lead.flight);
  EXPECT_EQ(table.Join("other", Mode::kCompile, {}).kind, Joined::kLeader);
  EXPECT_EQ(table.size(), 2u);
}

TEST(FlightTable, EveryWaiterGetsTheLeadersResultAndTheFlightLeavesTheTable) {
  FlightTable table = Table();
  auto lead = table.Join("k", Mode::kCompile, {});
  constexpr int kFollowers = 8;
  std::vector<FlightTable::JoinResult> followers;
  for (int i = 0; i < kFollowers; ++i) followers.push_back(table.Join("k", Mode::kCompile, {}));
  std::atomic<int> answered{0};
  std::latch started(kFollowers);
  std::vector<std::thread> threads;
  for (auto& f : followers) {
    threads.emplace_back([&, flight = f.flight] {
      started.count_down();
      auto r = table.Wait(*flight, Clock::now() + 10s, {});
      if (r.result && r.result->entry.ok() && (*r.result->entry)->cubin == "cubin of k") ++answered;
    });
  }
  started.wait();
  table.Finish(lead.flight, {EntryFor("k"), Origin::kCompiled}, false, {});
  for (auto& t : threads) t.join();
  EXPECT_EQ(answered.load(), kFollowers);
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.Join("k", Mode::kCompile, {}).kind, Joined::kLeader) << "a finished flight is not joined again";
}

TEST(FlightTable, PublishRunsBeforeTheFlightLeavesSoANewcomerFindsTheEntryPresent) {
  FlightTable table = Table();
  auto lead = table.Join("k", Mode::kCompile, {});
  bool published = false;
  table.Finish(lead.flight, {EntryFor("k"), Origin::kCompiled}, false, [&] { published = true; });
  EXPECT_EQ(table.Join("k", Mode::kCompile, [&] { return published; }).kind, Joined::kPresent);
}

TEST(FlightTable, TheLastWaiterGivingUpCancelsTheFlightAndANewRequestLeadsAgain) {
  FlightTable table = Table();
  auto lead = table.Join("k", Mode::kCompile, {});
  auto r = table.Wait(*lead.flight, Clock::now() + 10ms, {});
  EXPECT_FALSE(r.result.has_value());
  EXPECT_FALSE(r.still_wanted);
  EXPECT_FALSE(r.caller_gone);
  EXPECT_TRUE(lead.flight->cancelled());
  auto again = table.Join("k", Mode::kCompile, {});
  EXPECT_EQ(again.kind, Joined::kLeader) << "a cancelled flight is replaced, never joined";
  EXPECT_NE(again.flight, lead.flight);
  // The cancelled flight ending does not remove its replacement.
  table.Finish(lead.flight, {absl::CancelledError("cancelled"), Origin::kCompiled}, false, {});
  EXPECT_EQ(table.Join("k", Mode::kCompile, {}).kind, Joined::kFollower);
}

TEST(FlightTable, AWaiterLeavingWhileOthersWaitDoesNotCancel) {
  FlightTable table = Table();
  auto lead = table.Join("k", Mode::kCompile, {});
  auto follow = table.Join("k", Mode::kCompile, {});
  auto r = table.Wait(*follow.flight, Clock::now(), [] { return true; });
  EXPECT_TRUE(r.caller_gone);
  EXPECT_TRUE(r.still_wanted);
  EXPECT_FALSE(lead.flight->cancelled());
}

TEST(FlightTable, APrefetchKeepsTheFlightWantedWhenEveryWaiterLeaves) {
  FlightTable table = Table();
  auto lead = table.Join("k", Mode::kCompile, {});
  EXPECT_EQ(table.Join("k", Mode::kPrefetch, {}).kind, Joined::kFollower);
  auto r = table.Wait(*lead.flight, Clock::now(), {});
  EXPECT_TRUE(r.still_wanted);
  EXPECT_FALSE(lead.flight->cancelled());
}

TEST(FlightTable, CachedOnlyNeverLeadsAndNeverWaits) {
  FlightTable table = Table();
  EXPECT_EQ(table.Join("k", Mode::kCachedOnly, {}).kind, Joined::kAbsent);
  EXPECT_EQ(table.size(), 0u);
  auto lead = table.Join("k", Mode::kCompile, {});
  EXPECT_EQ(table.Join("k", Mode::kCachedOnly, {}).kind, Joined::kFollower);
  // Not counted as a waiter: the leader leaving alone cancels.
  table.Wait(*lead.flight, Clock::now(), {});
  EXPECT_TRUE(lead.flight->cancelled());
}

TEST(FlightTable, AProgramsFailureIsRememberedForItsTtlAndOthersAreNot) {
  FlightTable table = Table(1s);
  auto lead = table.Join("bad", Mode::kCompile, {});
  table.Finish(lead.flight, {absl::FailedPreconditionError("syntax error"), Origin::kCompiled}, true, {});
  auto again = table.Join("bad", Mode::kCompile, {});
  ASSERT_EQ(again.kind, Joined::kRemembered);
  EXPECT_EQ(again.failure.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(again.failure.message().find("remembered for up to 1 s"), std::string::npos) << again.failure;
  EXPECT_NE(again.failure.message().find("syntax error"), std::string::npos);

  auto crash = table.Join("crash", Mode::kCompile, {});
  table.Finish(crash.flight, {absl::UnavailableError("worker died"), Origin::kCompiled}, false, {});
  EXPECT_EQ(table.Join("crash", Mode::kCompile, {}).kind, Joined::kLeader);
}

TEST(FlightTable, TheNegativeMemoIsBounded) {
  FlightTable table = Table();  // 4 entries
  for (int i = 0; i < 10; ++i) {
    const std::string key = "bad" + std::to_string(i);
    table.Finish(table.Join(key, Mode::kCompile, {}).flight, {absl::FailedPreconditionError("no"), Origin::kCompiled},
                 true, {});
  }
  int remembered = 0;
  for (int i = 0; i < 10; ++i) {
    remembered += table.Join("bad" + std::to_string(i), Mode::kCachedOnly, {}).kind == Joined::kRemembered;
  }
  EXPECT_EQ(remembered, 4);
}

TEST(FlightTable, ACallbackWaiterIsCalledOnceWithTheResultOnTheFinishingThread) {
  FlightTable table = Table();
  auto lead = table.Join("k", Mode::kCompile, {});
  int calls = 0;
  std::string cubin;
  FlightTable::OnDone(*lead.flight, [&](const FlightResult& r) {
    ++calls;
    if (r.entry.ok()) cubin = (*r.entry)->cubin;
  });
  EXPECT_EQ(calls, 0) << "not before the flight finishes";
  table.Finish(lead.flight, {EntryFor("k"), Origin::kCompiled}, false, {});
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(cubin, "cubin of k");
  // Registered after the end: called at once, on this thread.
  FlightTable::OnDone(*lead.flight, [&](const FlightResult&) { ++calls; });
  EXPECT_EQ(calls, 2);
}

TEST(FlightTable, AWithdrawnLastWaiterCancelsTheFlightAndItsCallbackStillRuns) {
  FlightTable table = Table();
  auto lead = table.Join("k", Mode::kCompile, {});
  bool called = false;
  FlightTable::OnDone(*lead.flight, [&](const FlightResult&) { called = true; });
  FlightTable::Withdraw(*lead.flight);
  EXPECT_TRUE(lead.flight->cancelled());
  table.Finish(lead.flight, {absl::CancelledError("cancelled"), Origin::kCompiled}, false, {});
  EXPECT_TRUE(called);
  // Once finished, a withdraw changes nothing.
  FlightTable::Withdraw(*lead.flight);
}

TEST(FlightTable, AWithdrawLeavesAFlightOthersStillWaitFor) {
  FlightTable table = Table();
  auto lead = table.Join("k", Mode::kCompile, {});
  auto follower = table.Join("k", Mode::kCompile, {});
  ASSERT_EQ(follower.kind, Joined::kFollower);
  FlightTable::Withdraw(*lead.flight);
  EXPECT_FALSE(lead.flight->cancelled()) << "the follower still waits";
  auto prefetch_only = table.Join("p", Mode::kPrefetch, {});
  auto waiter = table.Join("p", Mode::kCompile, {});
  FlightTable::Withdraw(*waiter.flight);
  EXPECT_FALSE(prefetch_only.flight->cancelled()) << "a PREFETCH keeps it wanted";
}

}  // namespace
}  // namespace jitd::serving
