// The local path's reading (local_wire::FrameReader): the same units for
// every way the same bytes can arrive, and no unit (so no reason to stop
// reading) until one is whole.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "jitd/base/local_wire.h"

namespace jitd::local_wire {
namespace {

std::string Frame(std::string_view payload) {
  std::string out;
  AppendFrame(payload, &out);
  return out;
}

std::string Header(uint32_t length) {
  std::string out;
  coding::PutFixed32(&out, length);
  return out;
}

// Takes every unit the reader has, each as text; Ready() must say, before
// each, whether Next() takes one.
void Drain(FrameReader& reader, std::vector<std::string>* units) {
  while (true) {
    const bool ready = reader.Ready();
    const Unit unit = reader.Next();
    ASSERT_EQ(ready, unit != Unit::kNone) << "Ready() and Next() disagree";
    switch (unit) {
      case Unit::kNone:
        return;
      case Unit::kWholePreface:
        units->push_back("preface");
        break;
      case Unit::kFrame:
        units->push_back("frame:" + std::string(reader.payload()));
        break;
      case Unit::kOversized:
        units->push_back("oversized:" + std::to_string(reader.oversized_length()));
        break;
      case Unit::kNotPreface:
        units->push_back("not-preface");
        break;
    }
  }
}

// The units of `bytes` fed in the pieces that `cuts` (ascending offsets)
// make of them.
std::vector<std::string> Read(std::string_view bytes, const std::vector<size_t>& cuts, bool preface_due = true,
                              uint32_t max_payload = kMaxRequestBytes) {
  FrameReader reader(preface_due, max_payload);
  std::vector<std::string> units;
  size_t at = 0;
  for (size_t cut : cuts) {
    reader.Feed(bytes.substr(at, cut - at));
    Drain(reader, &units);
    at = cut;
  }
  reader.Feed(bytes.substr(at));
  Drain(reader, &units);
  return units;
}

// What a client sends: the preface, then a request (any payload will do
// here; the reader does not parse it) and an empty one.
const std::string kRequest =
    "\x0a\x0asmall.fill\x12\x0b\x0a\x05"
    "dtype\x12\x02"
    "fp32";
const std::string kHonest = std::string(kPreface) + Frame(kRequest) + Frame("");
const std::vector<std::string> kHonestUnits = {"preface", "frame:" + kRequest, "frame:"};

TEST(LocalWire, EverySplitOfAnHonestPrefaceAndRequestGivesTheSameUnits) {
  ASSERT_EQ(Read(kHonest, {}), kHonestUnits);
  for (size_t cut = 0; cut <= kHonest.size(); ++cut) {
    EXPECT_EQ(Read(kHonest, {cut}), kHonestUnits) << "split at " << cut;
  }
  for (size_t first = 0; first <= kHonest.size(); ++first) {
    for (size_t second = first; second <= kHonest.size(); ++second) {
      ASSERT_EQ(Read(kHonest, {first, second}), kHonestUnits) << "split at " << first << " and " << second;
    }
  }
  std::vector<size_t> every_byte;
  for (size_t cut = 1; cut < kHonest.size(); ++cut) every_byte.push_back(cut);
  EXPECT_EQ(Read(kHonest, every_byte), kHonestUnits);
}

TEST(LocalWire, FourBytesOfThePrefaceAreNoFrameHeaderAndWaitForTheRest) {
  // "jitd" read as a header would name a frame of 1.68e9 bytes.
  FrameReader reader(/*preface_due=*/true, kMaxRequestBytes);
  for (size_t n = 1; n < kPreface.size(); ++n) {
    FrameReader partial(/*preface_due=*/true, kMaxRequestBytes);
    partial.Feed(kPreface.substr(0, n));
    EXPECT_FALSE(partial.Ready()) << n << " bytes of the preface";
    EXPECT_EQ(partial.Next(), Unit::kNone);
    EXPECT_TRUE(partial.preface_due());
    EXPECT_EQ(partial.buffered(), n);
    EXPECT_FALSE(partial.spent());
  }
  reader.Feed(kPreface.substr(0, 4));
  EXPECT_EQ(reader.Next(), Unit::kNone);
  reader.Feed(kPreface.substr(4));
  EXPECT_TRUE(reader.Ready());
  EXPECT_EQ(reader.Next(), Unit::kWholePreface);
  EXPECT_FALSE(reader.preface_due());
  EXPECT_EQ(reader.buffered(), 0u);
}

TEST(LocalWire, AnUnfinishedFrameIsNotReadyAtAnyLength) {
  const std::string frame = Frame(kRequest);
  for (size_t n = 0; n < frame.size(); ++n) {
    FrameReader reader(/*preface_due=*/false, kMaxRequestBytes);
    reader.Feed(frame.substr(0, n));
    EXPECT_FALSE(reader.Ready()) << n << " bytes of a frame";
    EXPECT_EQ(reader.Next(), Unit::kNone);
    EXPECT_EQ(reader.buffered(), n);
  }
}

TEST(LocalWire, BytesThatLeaveThePrefaceEndTheStreamAtTheFirstWrongOne) {
  EXPECT_EQ(Read("jitX", {}), std::vector<std::string>{"not-preface"});
  EXPECT_EQ(Read("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", {1}), std::vector<std::string>{"not-preface"});
  FrameReader reader(/*preface_due=*/true, kMaxRequestBytes);
  reader.Feed("ji");
  reader.Feed("tX");
  EXPECT_EQ(reader.Next(), Unit::kNotPreface);
  EXPECT_TRUE(reader.spent());
  // Spent: nothing more is held or taken.
  reader.Feed(kHonest);
  EXPECT_FALSE(reader.Ready());
  EXPECT_EQ(reader.Next(), Unit::kNone);
  EXPECT_EQ(reader.buffered(), 0u);
}

TEST(LocalWire, AHeaderNamingMoreThanTheMostEndsTheStreamBeforeItsPayload) {
  constexpr uint32_t kMost = 16;
  const std::string at_most = Frame(std::string(kMost, 'x'));
  EXPECT_EQ(Read(at_most, {}, /*preface_due=*/false, kMost),
            std::vector<std::string>{"frame:" + std::string(kMost, 'x')});
  for (size_t cut = 0; cut <= kHeaderBytes; ++cut) {
    EXPECT_EQ(Read(Header(kMost + 1) + "and more", {cut}, /*preface_due=*/false, kMost),
              std::vector<std::string>{"oversized:17"})
        << "split at " << cut;
  }
  // A preface sent again where frames are due is read as a header.
  EXPECT_EQ(Read(kPreface, {}, /*preface_due=*/false), std::vector<std::string>{"oversized:1685350762"});
}

TEST(LocalWire, AReaderWithoutAPrefaceDueTakesFramesOnly) {
  const std::string frames = Frame("a") + Frame("") + Frame(std::string(300, 'b'));
  const std::vector<std::string> units = {"frame:a", "frame:", "frame:" + std::string(300, 'b')};
  for (size_t cut = 0; cut <= frames.size(); ++cut) {
    EXPECT_EQ(Read(frames, {cut}, /*preface_due=*/false), units) << "split at " << cut;
  }
}

TEST(LocalWire, WhatItHoldsIsTheUnfinishedUnitOnly) {
  FrameReader reader(/*preface_due=*/true, kMaxRequestBytes);
  reader.Feed(kHonest);
  std::vector<std::string> units;
  Drain(reader, &units);
  EXPECT_EQ(units, kHonestUnits);
  EXPECT_EQ(reader.buffered(), 0u);
  const std::string next = Frame("next");
  reader.Feed(next.substr(0, 5));
  EXPECT_EQ(reader.buffered(), 5u);
  reader.Feed(next.substr(5));
  ASSERT_EQ(reader.Next(), Unit::kFrame);
  EXPECT_EQ(reader.payload(), "next");
  EXPECT_EQ(reader.buffered(), 0u);
}

}  // namespace
}  // namespace jitd::local_wire
