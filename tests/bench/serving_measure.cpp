#include "serving_measure.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <thread>
#include <vector>

#include "bench_report.h"

namespace jitd::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Enough for every client's channel to be connected before the clock starts.
constexpr int kThroughputWarmupCalls = 20;

}  // namespace

absl::StatusOr<LatencyPair> MeasureSequential(const Call& a, const Call& b, int warmup, int calls) {
  for (int i = 0; i < warmup; ++i) {
    if (absl::Status s = a(); !s.ok()) return s;
    if (absl::Status s = b(); !s.ok()) return s;
  }
  std::vector<double> us[2];
  for (int i = 0; i < 2 * calls; ++i) {
    const Call& call = i % 2 == 0 ? a : b;
    const Clock::time_point start = Clock::now();
    if (absl::Status s = call(); !s.ok()) return s;
    us[i % 2].push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  LatencyPair pair;
  for (int k = 0; k < 2; ++k) {
    (k == 0 ? pair.a : pair.b) = Latency{Percentile(us[k], 0.50), Percentile(us[k], 0.99), us[k].size()};
  }
  return pair;
}

absl::StatusOr<Load> MeasureThroughput(const std::function<Call()>& make_call, int clients,
                                       std::chrono::milliseconds duration) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::mutex mutex;  // guards error and latencies
  std::vector<double> latencies_us;
  absl::Status error;
  auto fail = [&](absl::Status s) {
    std::lock_guard lock(mutex);
    if (error.ok()) error = std::move(s);
    stop = true;
  };

  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&] {
      Call call = make_call();
      for (int i = 0; i < kThroughputWarmupCalls; ++i) {
        if (absl::Status s = call(); !s.ok()) fail(s);
      }
      ++ready;
      while (!go && !stop) std::this_thread::yield();
      std::vector<double> mine;
      mine.reserve(1 << 16);
      while (!stop) {
        const Clock::time_point start = Clock::now();
        if (absl::Status s = call(); !s.ok()) {
          fail(s);
          break;
        }
        mine.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      }
      std::lock_guard lock(mutex);
      latencies_us.insert(latencies_us.end(), mine.begin(), mine.end());
    });
  }
  while (ready < clients && !stop) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const Clock::time_point start = Clock::now();
  go = true;
  std::this_thread::sleep_for(duration);
  stop = true;
  // Calls in flight at the stop finish and count; the clock runs until they do.
  for (std::thread& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!error.ok()) return error;
  return Load{static_cast<double>(latencies_us.size()) / seconds, Percentile(latencies_us, 0.50),
              Percentile(latencies_us, 0.99)};
}

}  // namespace jitd::bench
