// Admission (serving/admission.h): every bound refuses exactly past its
// limit, names itself in the refusal, and gives its place back.
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "serving/admission.h"

namespace jitd::serving {
namespace {

using Ticket = Admission::Ticket;

bool Mentions(const absl::Status& status, const std::string& text) {
  return std::string(status.message()).find(text) != std::string::npos;
}

TEST(Admission, CallsArePerPeerAndComeBack) {
  Admission admission({.max_calls_per_peer = 2}, [] { return size_t{0}; });
  Ticket a, b, c, other;
  ASSERT_TRUE(admission.AdmitCall("uid:1000", &a).ok());
  ASSERT_TRUE(admission.AdmitCall("uid:1000", &b).ok());
  const absl::Status refused = admission.AdmitCall("uid:1000", &c);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(Mentions(refused, "uid:1000 has 2 calls in flight")) << refused;
  EXPECT_TRUE(Mentions(refused, "--max-calls-per-peer 2")) << refused;
  EXPECT_FALSE(c.held());
  EXPECT_TRUE(admission.AdmitCall("uid:1001", &other).ok()) << "another peer has its own share";
  a.Release();
  EXPECT_TRUE(admission.AdmitCall("uid:1000", &c).ok()) << "a released call gives its place back";
  EXPECT_EQ(admission.stats().calls_refused, 1u);
}

TEST(Admission, NoBoundAdmitsEverythingAndHoldsNothing) {
  Admission admission({}, [] { return size_t{1000}; });
  for (int i = 0; i < 100; ++i) {
    Ticket call, flight;
    ASSERT_TRUE(admission.AdmitCall("p", &call).ok());
    ASSERT_TRUE(admission.AdmitFlight("p", /*prefetch=*/false, &flight).ok());
    EXPECT_FALSE(flight.held());
  }
}

TEST(Admission, PeerFlightShareCountsEmptyNamesAsOnePeer) {
  Admission admission({.max_flights_per_peer = 1}, [] { return size_t{0}; });
  Ticket first, second;
  ASSERT_TRUE(admission.AdmitFlight("", false, &first).ok());
  const absl::Status refused = admission.AdmitFlight("", false, &second);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(Mentions(refused, kUnnamedPeer)) << refused;
  EXPECT_EQ(admission.stats().peer_flights_refused, 1u);
  {
    Ticket moved = std::move(first);
    EXPECT_FALSE(first.held());
  }  // the moved-to ticket gives the place back
  EXPECT_TRUE(admission.AdmitFlight("", false, &second).ok());
}

TEST(Admission, PrefetchTakesAtMostHalfTheQueue) {
  Admission admission({.max_queue = 4}, [] { return size_t{0}; });
  Ticket a, b, c, live;
  ASSERT_TRUE(admission.AdmitFlight("p", true, &a).ok());
  ASSERT_TRUE(admission.AdmitFlight("p", true, &b).ok());
  const absl::Status refused = admission.AdmitFlight("p", true, &c);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(Mentions(refused, "half of --max-queue 4")) << refused;
  EXPECT_TRUE(admission.AdmitFlight("p", false, &live).ok()) << "a request that waits is not held to PREFETCH's half";
  EXPECT_EQ(admission.stats().prefetching, 2u);
  b.Release();
  EXPECT_EQ(admission.stats().prefetching, 1u);
  EXPECT_TRUE(admission.AdmitFlight("p", true, &c).ok());
  EXPECT_EQ(admission.stats().prefetches_refused, 1u);
}

TEST(Admission, AFullQueueRefusesPrefetchAndFleetWaitsNotLiveFlights) {
  std::atomic<size_t> depth{3};
  Admission admission({.max_queue = 4}, [&depth] { return depth.load(); });
  Ticket wait, prefetch, second_wait, live;
  ASSERT_TRUE(admission.AdmitFleetWait("k", &wait).ok());  // 3 queued + this wait = 4
  EXPECT_EQ(admission.stats().fleet_waiting, 1u);
  const absl::Status full = admission.AdmitFleetWait("ew.axpby", &second_wait);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(Mentions(full, "not waiting for ew.axpby")) << full;
  EXPECT_TRUE(Mentions(admission.AdmitFlight("p", true, &prefetch), "compile queue is full (4 compiles waiting"));
  EXPECT_TRUE(admission.AdmitFlight("p", false, &live).ok()) << "the pool's own queue bound answers live flights";
  wait.Release();
  EXPECT_EQ(admission.stats().fleet_waiting, 0u);
  EXPECT_TRUE(admission.AdmitFleetWait("k", &second_wait).ok());
  EXPECT_EQ(admission.stats().fleet_waits_refused, 1u);
}

TEST(Admission, PeerFlightShareIsTheWorkersAndHalfTheQueue) {
  EXPECT_EQ(Admission::PeerFlightShare(4, 256), 132u);
  EXPECT_EQ(Admission::PeerFlightShare(2, 4), 4u);
  EXPECT_EQ(Admission::PeerFlightShare(8, 3), 0u) << "a queue of fewer than 4 has no half worth keeping";
}

}  // namespace
}  // namespace jitd::serving
