// Progress as a person sees it: the redrawn terminal line never wraps at
// the terminal's width, the item's name is cut to fit, a plain line per item
// when not a terminal, and an ETA computed from the items that did work.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "jitd/base/progress.h"

namespace jitd {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// What Progress writes, read back from a temporary file.
class Captured {
 public:
  Captured() : file_(std::tmpfile()) {}
  ~Captured() { std::fclose(file_); }
  std::FILE* file() { return file_; }
  std::string Text() {
    std::fflush(file_);
    std::string out;
    std::rewind(file_);
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, file_)) > 0;) out.append(buf, n);
    return out;
  }
  // Each redraw of the terminal line, without its "\r\033[K" prefix.
  std::vector<std::string> Redraws() {
    std::vector<std::string> out;
    const std::string text = Text();
    const std::string erase = "\r\033[K";
    for (size_t at = text.find(erase); at != std::string::npos;) {
      const size_t next = text.find(erase, at + erase.size());
      std::string line =
          text.substr(at + erase.size(), next == std::string::npos ? std::string::npos : next - at - erase.size());
      if (!line.empty() && line.back() == '\n') line.pop_back();
      out.push_back(line);
      at = next;
    }
    return out;
  }

 private:
  std::FILE* file_;
};

// A clock the test moves.
struct FakeClock {
  double now = 1000;
  Progress::Clock Fn() {
    return [this] { return now; };
  }
};

const std::string kLongName =
    "diffusion.modulate_scale_shift{dtype=bf16}@sm_100a[-lineinfo,-DJITD_EXTRA_LONG_OPTION=1]";

TEST(Progress, AtEightyColumnsEveryRedrawFitsOnOneLineAndKeepsBothEndsOfTheName) {
  Captured out;
  FakeClock clock;
  Progress progress("warm", 240, out.file(), /*interactive=*/true, /*columns=*/80, clock.Fn());
  for (int i = 0; i < 240; ++i) {
    clock.now += 1.5;
    progress.Done("compiled", kLongName, "812 ms", 1.4);
  }
  progress.Finish();
  const std::vector<std::string> lines = out.Redraws();
  ASSERT_EQ(lines.size(), 242u);  // the first, at once, then one per item and the last
  for (const std::string& line : lines) {
    EXPECT_LT(line.size(), 80u) << line;  // below the width: the cursor never wraps
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  }
  EXPECT_THAT(lines[0], HasSubstr("0/240"));
  EXPECT_THAT(lines[1], StartsWith("warm ["));
  EXPECT_THAT(lines[1], HasSubstr("1/240"));
  EXPECT_THAT(lines[1], HasSubstr("diffusion.modulate"));  // the name's start
  EXPECT_THAT(lines[1], HasSubstr("..."));
  EXPECT_THAT(lines[1], HasSubstr("=1]"));  // and its end
  EXPECT_THAT(lines.back(), HasSubstr("240/240"));
}

TEST(Progress, ANarrowTerminalDropsTheBarBeforeTheCounts) {
  Captured out;
  FakeClock clock;
  Progress progress("warm", 12, out.file(), true, 40, clock.Fn());
  progress.Done("compiled", kLongName, "", 1.0);
  const std::vector<std::string> lines = out.Redraws();
  ASSERT_EQ(lines.size(), 2u);  // 0/12 at once, then 1/12
  EXPECT_LT(lines[1].size(), 40u) << lines[1];
  EXPECT_THAT(lines[1], Not(HasSubstr("[")));
  EXPECT_THAT(lines[1], HasSubstr("1/12"));
  EXPECT_THAT(lines[1], HasSubstr("eta"));
}

// A warm-up's first item may take seconds (workers starting, a first
// compile): the line is there before it, counting from the start.
TEST(Progress, OnATerminalTheLineIsDrawnAtOnceWithNothingDone) {
  Captured out;
  FakeClock clock;
  Progress progress("warm", 52, out.file(), true, 80, clock.Fn());
  ASSERT_EQ(out.Redraws().size(), 1u);
  EXPECT_THAT(out.Redraws().front(), HasSubstr("0/52  0:00"));
  clock.now += 5.2;
  progress.Done("compiled", "norm.rmsnorm{dtype=bf16}@sm_90", "5200 ms", 5.2);
  EXPECT_THAT(out.Redraws().back(), HasSubstr("1/52  0:05"));
  Captured plain;
  Progress quiet("warm", 52, plain.file(), false, 80, clock.Fn());
  EXPECT_EQ(plain.Text(), "") << "a log gets one line per item, none before";
}

TEST(Progress, AFailureStaysOnScreenAboveTheRedrawnLine) {
  Captured out;
  FakeClock clock;
  Progress progress("warm", 2, out.file(), true, 80, clock.Fn());
  progress.Done("failed", "small.broken{}@sm_90", "error: expected a ';'");
  EXPECT_THAT(out.Text(), HasSubstr("failed   small.broken{}@sm_90  error: expected a ';'\n"));
}

TEST(Progress, NotATerminalWritesOnePlainLinePerItemWithNoEscapes) {
  Captured out;
  Progress progress("warm", 3, out.file(), /*interactive=*/false);
  progress.Done("compiled", "small.fill{dtype=fp32}@sm_90", "31 ms", 0.031);
  progress.Done("cached", "small.fill{dtype=fp64}@sm_90", "", 0.0);
  progress.Done("failed", "small.broken{}@sm_90", "error: expected a ';'");
  progress.Finish();
  EXPECT_EQ(out.Text(),
            "[1/3] compiled small.fill{dtype=fp32}@sm_90  31 ms\n"
            "[2/3] cached   small.fill{dtype=fp64}@sm_90\n"
            "[3/3] failed   small.broken{}@sm_90  error: expected a ';'\n");
}

TEST(Progress, CacheHitsFirstGiveNoEtaInsteadOfZero) {
  Captured out;
  FakeClock clock;
  Progress progress("warm", 100, out.file(), true, 80, clock.Fn());
  for (int i = 0; i < 50; ++i) {
    clock.now += 0.001;
    progress.Done("cached", "k", "", 0.0);
  }
  EXPECT_EQ(progress.Eta(), "--:--");
}

TEST(Progress, TheEtaComesFromTheItemsThatCompiledNotFromTheCacheHitsBeforeThem) {
  Captured out;
  FakeClock clock;
  Progress progress("warm", 100, out.file(), true, 80, clock.Fn());
  // 40 hits in the first 0.2 s, then compiles: 2 at a time, 3 s each.
  for (int i = 0; i < 40; ++i) {
    clock.now += 0.005;
    progress.Done("cached", "k", "", 0.0);
  }
  for (int i = 0; i < 10; ++i) {
    if (i % 2 == 0) clock.now += 3;
    progress.Done("compiled", "k", "", 3.0);
  }
  // 10 compiles in 15 s of wall time since the first began: 1.5 s each,
  // 50 left: 75 s. (The mean over every item would say 15.2/50*50 = 15 s.)
  EXPECT_EQ(progress.Eta(), "1:15");
}

TEST(Progress, WithoutWorkTimesTheEtaIsTheMeanTimePerItem) {
  Captured out;
  FakeClock clock;
  Progress progress("compile-all", 10, out.file(), true, 80, clock.Fn());
  EXPECT_EQ(progress.Eta(), "--:--");
  clock.now += 4;
  progress.Done("ok", "k");
  clock.now += 4;
  progress.Done("ok", "k");
  EXPECT_EQ(progress.Eta(), "0:32");
  for (int i = 0; i < 8; ++i) progress.Done("ok", "k");
  EXPECT_EQ(progress.Eta(), "0:00");
}

TEST(Progress, LongRunsShowHours) {
  Captured out;
  FakeClock clock;
  Progress progress("warm", 1000, out.file(), true, 80, clock.Fn());
  clock.now += 10;
  progress.Done("compiled", "k", "", 10.0);
  EXPECT_EQ(progress.Eta(), "2:46:30");
}

}  // namespace
}  // namespace jitd
