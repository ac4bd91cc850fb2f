// The metrics registry: the exact text exposition (0.0.4) it renders,
// registration errors, collectors, and updates racing renders.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "metrics/metrics.h"

namespace jitd::metrics {
namespace {

template <typename T>
T* Must(absl::StatusOr<T*> family) {
  EXPECT_TRUE(family.ok()) << family.status();
  return family.ok() ? *family : nullptr;
}

// "x" + std::to_string(n), which GCC 12 misreads as a -Wrestrict case.
std::string Numbered(const char* prefix, int n) {
  std::string s = prefix;
  s += std::to_string(n);
  return s;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Every line is a # HELP, a # TYPE or a sample `name{labels} value`, with
// label values quoted and escaped; the text ends with a newline.
void ExpectWellFormed(const std::string& text) {
  static const std::regex help(R"(# HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*)");
  static const std::regex type(R"(# TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (counter|gauge|histogram))");
  static const std::regex sample(
      R"re([a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*"(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")*\})? (NaN|[+-]Inf|-?[0-9.e+-]+))re");
  if (!text.empty()) {
    EXPECT_EQ(text.back(), '\n');
  }
  for (const std::string& line : Lines(text)) {
    EXPECT_TRUE(std::regex_match(line, help) || std::regex_match(line, type) || std::regex_match(line, sample))
        << "not a line of the exposition format: " << line;
  }
}

TEST(MetricsRegistry, RendersCountersGaugesAndHistogramsWithLabelsExactly) {
  Registry registry;
  CounterFamily* requests =
      Must(registry.AddCounter("jitd_requests_total", "Kernel requests served.", {"outcome", "source"}));
  GaugeFamily* circuit = Must(registry.AddGauge(
      "jitd_remote_circuit_open", "1 while the circuit is \"open\".\nA \\ backslash and a second line.", {"peer"}));
  HistogramFamily* duration = Must(
      registry.AddHistogram("jitd_request_duration_seconds", "Time to serve a request.", {"source"}, {0.25, 1, 2.5}));
  ASSERT_TRUE(requests && circuit && duration);

  requests->WithLabels({"ok", "memory"}).Increment(3);
  requests->WithLabels({"error", "disk"}).Increment();
  circuit->WithLabels({"x\"y\\z\nw"}).Set(1);
  circuit->WithLabels({"plain"}).Set(-0.5);
  Histogram& memory = duration->WithLabels({"memory"});
  for (double v : {0.125, 0.25, 0.5, 4.0}) memory.Observe(v);

  EXPECT_EQ(registry.Render(),
            "# HELP jitd_requests_total Kernel requests served.\n"
            "# TYPE jitd_requests_total counter\n"
            "jitd_requests_total{outcome=\"error\",source=\"disk\"} 1\n"
            "jitd_requests_total{outcome=\"ok\",source=\"memory\"} 3\n"
            "# HELP jitd_remote_circuit_open 1 while the circuit is \"open\".\\nA \\\\ backslash and a second line.\n"
            "# TYPE jitd_remote_circuit_open gauge\n"
            "jitd_remote_circuit_open{peer=\"plain\"} -0.5\n"
            "jitd_remote_circuit_open{peer=\"x\\\"y\\\\z\\nw\"} 1\n"
            "# HELP jitd_request_duration_seconds Time to serve a request.\n"
            "# TYPE jitd_request_duration_seconds histogram\n"
            "jitd_request_duration_seconds_bucket{source=\"memory\",le=\"0.25\"} 2\n"
            "jitd_request_duration_seconds_bucket{source=\"memory\",le=\"1\"} 3\n"
            "jitd_request_duration_seconds_bucket{source=\"memory\",le=\"2.5\"} 3\n"
            "jitd_request_duration_seconds_bucket{source=\"memory\",le=\"+Inf\"} 4\n"
            "jitd_request_duration_seconds_sum{source=\"memory\"} 4.875\n"
            "jitd_request_duration_seconds_count{source=\"memory\"} 4\n");
  ExpectWellFormed(registry.Render());
}

TEST(MetricsRegistry, FamiliesWithoutLabelsRenderZeroAtOnce) {
  Registry registry;
  ASSERT_TRUE(registry.AddCounter("jitd_cache_evictions_total", "Evictions.").ok());
  ASSERT_TRUE(registry.AddGauge("jitd_compile_queue_depth", "Queued compiles.").ok());
  ASSERT_TRUE(registry.AddHistogram("jitd_compile_duration_seconds", "Compile time.", {}, {1, 10}).ok());
  EXPECT_EQ(registry.Render(),
            "# HELP jitd_cache_evictions_total Evictions.\n"
            "# TYPE jitd_cache_evictions_total counter\n"
            "jitd_cache_evictions_total 0\n"
            "# HELP jitd_compile_queue_depth Queued compiles.\n"
            "# TYPE jitd_compile_queue_depth gauge\n"
            "jitd_compile_queue_depth 0\n"
            "# HELP jitd_compile_duration_seconds Compile time.\n"
            "# TYPE jitd_compile_duration_seconds histogram\n"
            "jitd_compile_duration_seconds_bucket{le=\"1\"} 0\n"
            "jitd_compile_duration_seconds_bucket{le=\"10\"} 0\n"
            "jitd_compile_duration_seconds_bucket{le=\"+Inf\"} 0\n"
            "jitd_compile_duration_seconds_sum 0\n"
            "jitd_compile_duration_seconds_count 0\n");
}

TEST(MetricsRegistry, FamilyWithLabelsRendersOnlyItsHeaderUntilAChildIsMade) {
  Registry registry;
  CounterFamily* compiles = Must(registry.AddCounter("jitd_compiles_total", "Compiles.", {"result"}));
  ASSERT_NE(compiles, nullptr);
  EXPECT_EQ(registry.Render(), "# HELP jitd_compiles_total Compiles.\n# TYPE jitd_compiles_total counter\n");
  compiles->WithLabels({"ok"});
  EXPECT_EQ(
      registry.Render(),
      "# HELP jitd_compiles_total Compiles.\n# TYPE jitd_compiles_total counter\njitd_compiles_total{result=\"ok\"} "
      "0\n");
}

TEST(MetricsRegistry, HistogramBucketsAreCumulativeAndBoundsInclusive) {
  Registry registry;
  HistogramFamily* family = Must(registry.AddHistogram("h", "h", {}, {1, 2, 4, 8}));
  ASSERT_NE(family, nullptr);
  Histogram& h = family->WithLabels({});
  // One each on the bounds (le is inclusive), two between, one below all,
  // three above all.
  for (double v : {1.0, 2.0, 4.0, 8.0, 1.5, 3.0, -1.0, 9.0, 100.0, 1e300}) h.Observe(v);
  const Histogram::Snapshot s = h.Read();
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 4, 6, 7, 10}));
  EXPECT_EQ(s.count, 10u);
  const std::string text = registry.Render();
  EXPECT_NE(text.find("h_bucket{le=\"1\"} 2\nh_bucket{le=\"2\"} 4\nh_bucket{le=\"4\"} 6\nh_bucket{le=\"8\"} 7\n"
                      "h_bucket{le=\"+Inf\"} 10\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("h_count 10\n"), std::string::npos) << text;
}

TEST(MetricsRegistry, NaNObservationGoesToInfBucketOnly) {
  Registry registry;
  HistogramFamily* family = Must(registry.AddHistogram("h", "h", {}, {1}));
  ASSERT_NE(family, nullptr);
  family->WithLabels({}).Observe(std::nan(""));
  EXPECT_EQ(registry.Render(),
            "# HELP h h\n# TYPE h histogram\nh_bucket{le=\"1\"} 0\nh_bucket{le=\"+Inf\"} 1\nh_sum NaN\nh_count 1\n");
}

TEST(MetricsRegistry, TrailingInfBoundIsDroppedNotDoubled) {
  Registry registry;
  HistogramFamily* family = Must(registry.AddHistogram("h", "h", {}, {0.5, std::numeric_limits<double>::infinity()}));
  ASSERT_NE(family, nullptr);
  EXPECT_EQ(registry.Render(),
            "# HELP h h\n# TYPE h histogram\nh_bucket{le=\"0.5\"} 0\nh_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n");
}

TEST(MetricsRegistry, CounterIntegersStayExactPastTwoToThe53) {
  Registry registry;
  CounterFamily* family = Must(registry.AddCounter("c_total", "c"));
  ASSERT_NE(family, nullptr);
  Counter& c = family->WithLabels({});
  c.Increment(uint64_t{1} << 60);
  c.Increment();
  EXPECT_EQ(c.IntegerValue(), (uint64_t{1} << 60) + 1);
  EXPECT_EQ(registry.Render(), "# HELP c_total c\n# TYPE c_total counter\nc_total 1152921504606846977\n");
}

TEST(MetricsRegistry, CounterAddsFractionsAndIgnoresNegativeAndNaN) {
  Registry registry;
  CounterFamily* family = Must(registry.AddCounter("seconds_total", "s"));
  ASSERT_NE(family, nullptr);
  Counter& c = family->WithLabels({});
  c.Increment(2);
  c.Add(0.25);
  c.Add(-5);
  c.Add(std::nan(""));
  c.Add(0.25);
  EXPECT_EQ(c.Value(), 2.5);
  EXPECT_EQ(registry.Render(), "# HELP seconds_total s\n# TYPE seconds_total counter\nseconds_total 2.5\n");
}

TEST(MetricsRegistry, GaugeSetAddIncrementDecrement) {
  Registry registry;
  GaugeFamily* family = Must(registry.AddGauge("g", "g"));
  ASSERT_NE(family, nullptr);
  Gauge& g = family->WithLabels({});
  g.Set(10);
  g.Increment();
  g.Decrement();
  g.Decrement();
  g.Add(-0.5);
  EXPECT_EQ(g.Value(), 8.5);
  g.Set(std::numeric_limits<double>::infinity());
  EXPECT_EQ(registry.Render(), "# HELP g g\n# TYPE g gauge\ng +Inf\n");
}

TEST(MetricsRegistry, WithLabelsReturnsTheSameChildEveryTime) {
  Registry registry;
  CounterFamily* family = Must(registry.AddCounter("c_total", "c", {"a", "b"}));
  ASSERT_NE(family, nullptr);
  Counter* first = &family->WithLabels({"x", "y"});
  for (int i = 0; i < 1000; ++i) family->WithLabels({std::to_string(i), "z"});  // rebalances the map
  EXPECT_EQ(first, &family->WithLabels({"x", "y"}));
  const std::vector<std::string> values = {"x", "y"};
  EXPECT_EQ(first, &family->WithLabels(values));
  EXPECT_NE(first, &family->WithLabels({"y", "x"}));
}

TEST(MetricsRegistry, WithLabelsOfTheWrongArityIsNotRendered) {
  Registry registry;
  CounterFamily* family = Must(registry.AddCounter("c_total", "c", {"a", "b"}));
  ASSERT_NE(family, nullptr);
  Counter& wrong = family->WithLabels({"only-one"});
  wrong.Increment(7);
  Counter& also_wrong = family->WithLabels(std::vector<std::string>{"1", "2", "3"});
  also_wrong.Increment(7);
  EXPECT_EQ(registry.Render(), "# HELP c_total c\n# TYPE c_total counter\n");
  EXPECT_NE(&wrong, &family->WithLabels({"only-one", "x"}));
}

TEST(MetricsRegistry, RejectsInvalidMetricNames) {
  Registry registry;
  for (const char* bad : {"", "1abc", "a-b", "a b", "a.b", "é", "a\n"}) {
    absl::StatusOr<CounterFamily*> c = registry.AddCounter(bad, "x");
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << '"' << bad << '"';
    EXPECT_EQ(registry.AddGauge(bad, "x").status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(registry.AddHistogram(bad, "x", {}, {1}).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(registry.AddCounter("1abc", "x").status().message().find("1abc"), std::string::npos);
  for (const char* good : {"a", "_a", ":a", "a:b_c9", "A_Z"}) {
    EXPECT_TRUE(registry.AddCounter(good, "x").ok()) << good;
  }
  EXPECT_EQ(registry.Render().find("1abc"), std::string::npos);
}

TEST(MetricsRegistry, RejectsInvalidAndRepeatedLabelNames) {
  Registry registry;
  for (const char* bad : {"", "1a", "a-b", "__reserved", "a:b"}) {
    EXPECT_EQ(registry.AddCounter("c_total", "c", {"ok", bad}).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
  absl::StatusOr<GaugeFamily*> twice = registry.AddGauge("g", "g", {"a", "b", "a"});
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(twice.status().message().find("twice"), std::string::npos) << twice.status();
  EXPECT_EQ(registry.AddHistogram("h", "h", {"le"}, {1}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(registry.AddCounter("c_total", "c", {"_ok", "a1"}).ok());
  EXPECT_TRUE(registry.AddGauge("g2", "g", {"le"}).ok());  // only histograms reserve le
}

TEST(MetricsRegistry, RejectsBadBucketBounds) {
  Registry registry;
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<std::vector<double>> bad = {{},        {inf},      {2, 1}, {1, 1}, {1, std::nan(""), 3},
                                                {-inf, 1}, {1, inf, 2}};
  for (const auto& bounds : bad) {
    EXPECT_EQ(registry.AddHistogram("h", "h", {}, bounds).status().code(), absl::StatusCode::kInvalidArgument)
        << bounds.size() << " bounds";
  }
  EXPECT_TRUE(registry.AddHistogram("h", "h", {}, {-1, 0, 1e-9, 1e9}).ok());
}

TEST(MetricsRegistry, RejectsNamesTakenByAnotherFamilyOrAHistogramsSamples) {
  Registry registry;
  ASSERT_TRUE(registry.AddCounter("jitd_compiles_total", "c").ok());
  ASSERT_TRUE(registry.AddHistogram("jitd_compile_duration_seconds", "h", {}, {1}).ok());
  ASSERT_TRUE(registry.AddGauge("x_count", "g").ok());

  absl::StatusOr<GaugeFamily*> same = registry.AddGauge("jitd_compiles_total", "again");
  EXPECT_EQ(same.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(same.status().message().find("jitd_compiles_total"), std::string::npos);
  EXPECT_EQ(registry.AddCounter("jitd_compile_duration_seconds_count", "c").status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.AddGauge("jitd_compile_duration_seconds_bucket", "c").status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.AddHistogram("x", "would render x_count", {}, {1}).status().code(),
            absl::StatusCode::kAlreadyExists);
  // The failed registrations left nothing behind.
  EXPECT_EQ(Lines(registry.Render()).size(), 3u + 6u + 3u);
}

TEST(MetricsRegistry, FormatsValuesShortestAndSpecials) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(1), "1");
  EXPECT_EQ(FormatValue(-2.5), "-2.5");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(1e-05), "1e-05");
  EXPECT_EQ(FormatValue(123456789), "123456789");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
  EXPECT_EQ(std::stod(FormatValue(0.1 + 0.2)), 0.1 + 0.2);  // round-trips
}

TEST(MetricsRegistry, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd\te"), "a\\\"b\\\\c\\nd\te");
  EXPECT_EQ(EscapeHelp("a\"b\\c\nd"), "a\"b\\\\c\\nd");
}

TEST(MetricsRegistry, BucketHelpers) {
  EXPECT_EQ(ExponentialBuckets(0.001, 10, 4), (std::vector<double>{0.001, 0.01, 0.1, 1}));
  EXPECT_EQ(LinearBuckets(1, 0.5, 3), (std::vector<double>{1, 1.5, 2}));
  EXPECT_TRUE(ExponentialBuckets(0, 2, 3).empty());
  EXPECT_TRUE(ExponentialBuckets(1, 1, 3).empty());
  EXPECT_TRUE(LinearBuckets(0, 0, 3).empty());
}

TEST(MetricsRegistry, CollectorsRenderAfterFamiliesGroupedByName) {
  Registry registry;
  ASSERT_TRUE(registry.AddCounter("jitd_cache_evictions_total", "Evictions.").ok());
  uint64_t bytes = 4096;
  registry.AddCollector([&](Emitter& e) {
    e.Gauge("jitd_cache_bytes", "Bytes in the cache.", static_cast<double>(bytes), {{"tier", "disk"}});
    e.Counter("jitd_cache_corruptions_total", "Corrupt entries found.", 2);
  });
  registry.AddCollector([](Emitter& e) {
    // Joins the first collector's family: one HELP/TYPE, the first help text.
    e.Gauge("jitd_cache_bytes", "Ignored help.", 128, {{"tier", "memory"}});
    e.Gauge("jitd_compile_queue_depth", "Compiles waiting.", 3);
  });
  const std::string expected =
      "# HELP jitd_cache_evictions_total Evictions.\n"
      "# TYPE jitd_cache_evictions_total counter\n"
      "jitd_cache_evictions_total 0\n"
      "# HELP jitd_cache_bytes Bytes in the cache.\n"
      "# TYPE jitd_cache_bytes gauge\n"
      "jitd_cache_bytes{tier=\"disk\"} 4096\n"
      "jitd_cache_bytes{tier=\"memory\"} 128\n"
      "# HELP jitd_cache_corruptions_total Corrupt entries found.\n"
      "# TYPE jitd_cache_corruptions_total counter\n"
      "jitd_cache_corruptions_total 2\n"
      "# HELP jitd_compile_queue_depth Compiles waiting.\n"
      "# TYPE jitd_compile_queue_depth gauge\n"
      "jitd_compile_queue_depth 3\n";
  EXPECT_EQ(registry.Render(), expected);
  bytes = 8192;  // read at scrape time
  EXPECT_NE(registry.Render().find("jitd_cache_bytes{tier=\"disk\"} 8192\n"), std::string::npos);
}

TEST(MetricsRegistry, CollectorSamplesThatWouldBreakTheExpositionAreDropped) {
  Registry registry;
  ASSERT_TRUE(registry.AddCounter("jitd_requests_total", "r").ok());
  ASSERT_TRUE(registry.AddHistogram("jitd_compile_duration_seconds", "h", {}, {1}).ok());
  registry.AddCollector([](Emitter& e) {
    e.Gauge("bad-name", "x", 1);
    e.Gauge("jitd_requests_total", "registered", 1);
    e.Gauge("jitd_compile_duration_seconds_count", "a histogram's sample", 1);
    e.Gauge("ok", "first", 1, {{"a", "1"}});
    e.Counter("ok", "other type", 2, {{"a", "2"}});
    e.Gauge("ok", "same sample", 3, {{"a", "1"}});
    e.Gauge("ok", "bad label", 4, {{"__a", "1"}});
    e.Gauge("ok", "label twice", 5, {{"a", "3"}, {"a", "4"}});
    e.Gauge("ok", "escaped", 6, {{"a", "q\"\\\n"}});
    e.Gauge("all_dropped", "nothing valid", 1, {{"1", "x"}});
  });
  const std::string text = registry.Render();
  EXPECT_NE(text.find("# HELP ok first\n# TYPE ok gauge\nok{a=\"1\"} 1\nok{a=\"q\\\"\\\\\\n\"} 6\n"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("bad-name"), std::string::npos) << text;
  EXPECT_EQ(text.find("registered"), std::string::npos) << text;
  EXPECT_EQ(text.find("jitd_compile_duration_seconds_count 1"), std::string::npos) << text;
  EXPECT_EQ(text.find("all_dropped"), std::string::npos) << text;
  EXPECT_EQ(Lines(text).size(), 3u + 6u + 4u);
  ExpectWellFormed(text);
  EXPECT_EQ(text, registry.Render());  // the same every time (warnings are logged once)
}

TEST(MetricsRegistry, RemovedCollectorNeverRunsAgainEvenWhileRendering) {
  Registry registry;
  std::atomic<int> calls{0};
  const Registry::CollectorId id = registry.AddCollector([&](Emitter& e) {
    calls.fetch_add(1);
    e.Gauge("x", "x", 1);
  });
  std::atomic<bool> stop{false};
  std::atomic<int> renders{0};
  std::thread scraper([&] {
    while (!stop.load()) {
      registry.Render();
      renders.fetch_add(1);
    }
  });
  while (calls.load() < 10) std::this_thread::yield();
  registry.RemoveCollector(id);
  const int after_remove = calls.load();
  const int renders_at_remove = renders.load();
  while (renders.load() < renders_at_remove + 10) std::this_thread::yield();
  stop = true;
  scraper.join();
  EXPECT_EQ(calls.load(), after_remove);
  EXPECT_EQ(registry.Render(), "");
  registry.RemoveCollector(id);      // no-op
  registry.RemoveCollector(123456);  // no-op
}

// Observations and increments from many threads while another renders
// continuously: every render is internally consistent, nothing is lost.
TEST(MetricsRegistry, ConcurrentUpdatesWhileRenderingLoseNothing) {
  Registry registry;
  CounterFamily* requests = Must(registry.AddCounter("jitd_requests_total", "r", {"outcome", "source"}));
  HistogramFamily* duration =
      Must(registry.AddHistogram("jitd_request_duration_seconds", "d", {"source"}, {0.5, 1, 2}));
  GaugeFamily* depth = Must(registry.AddGauge("depth", "d"));
  ASSERT_TRUE(requests && duration && depth);
  std::atomic<int> collector_calls{0};
  registry.AddCollector([&](Emitter& e) { e.Gauge("calls", "c", collector_calls.fetch_add(1)); });

  constexpr int kThreads = 8;
  constexpr int kPerThread = 20000;
  std::atomic<bool> done{false};
  std::atomic<int> renders{0};
  std::atomic<int> inconsistent{0};
  std::thread scraper([&] {
    static const std::regex inf(R"(jitd_request_duration_seconds_bucket\{source="shared",le="\+Inf"\} (\d+))");
    static const std::regex count(R"(jitd_request_duration_seconds_count\{source="shared"\} (\d+))");
    do {
      const std::string text = registry.Render();
      std::smatch a, b;
      if (std::regex_search(text, a, inf) && std::regex_search(text, b, count) && a[1] != b[1]) ++inconsistent;
      renders.fetch_add(1);
    } while (!done.load());
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Updates start once the scraper is rendering, so the two overlap
      // even when the machine runs the scraper thread late.
      while (renders.load() == 0) std::this_thread::yield();
      // Children made concurrently too, per thread and shared.
      Counter& shared = requests->WithLabels({"ok", "memory"});
      Counter& own = requests->WithLabels({"ok", Numbered("thread", t)});
      Histogram& h = duration->WithLabels({"shared"});
      Gauge& g = depth->WithLabels({});
      for (int i = 0; i < kPerThread; ++i) {
        shared.Increment();
        own.Increment();
        h.Observe((i % 4) * 0.5);  // 0, 0.5, 1, 1.5: exact sums
        g.Increment();
        g.Decrement();
      }
    });
  }
  for (auto& t : threads) t.join();
  done = true;
  scraper.join();

  EXPECT_GT(renders.load(), 0);
  EXPECT_EQ(inconsistent.load(), 0);
  EXPECT_EQ(requests->WithLabels({"ok", "memory"}).IntegerValue(), uint64_t{kThreads} * kPerThread);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(requests->WithLabels({"ok", Numbered("thread", t)}).IntegerValue(), uint64_t{kPerThread});
  }
  const Histogram::Snapshot s = duration->WithLabels({"shared"}).Read();
  const uint64_t n = uint64_t{kThreads} * kPerThread;
  EXPECT_EQ(s.count, n);
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{n / 2, 3 * n / 4, n, n}));
  EXPECT_EQ(s.sum, static_cast<double>(n / 4) * (0 + 0.5 + 1 + 1.5));
  EXPECT_EQ(depth->WithLabels({}).Value(), 0);
  const std::string text = registry.Render();
  ExpectWellFormed(text);
  EXPECT_NE(text.find("jitd_requests_total{outcome=\"ok\",source=\"memory\"} 160000\n"), std::string::npos) << text;
  EXPECT_NE(text.find("jitd_request_duration_seconds_count{source=\"shared\"} 160000\n"), std::string::npos);
}

TEST(MetricsRegistry, ConcurrentRegistrationAndRendering) {
  Registry registry;
  std::atomic<bool> done{false};
  std::thread scraper([&] {
    while (!done.load()) ExpectWellFormed(registry.Render());
  });
  std::vector<std::thread> threads;
  std::atomic<int> created{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        if (registry.AddCounter(Numbered("m", t * 100 + i), "c", {"x"}).ok()) ++created;
        if (registry.AddCounter("same_for_all", "c").ok()) ++created;  // exactly one wins
      }
    });
  }
  for (auto& t : threads) t.join();
  done = true;
  scraper.join();
  EXPECT_EQ(created.load(), 4 * 50 + 1);
}

}  // namespace
}  // namespace jitd::metrics
