// Soak: many clients mixing hits, misses (compiles), evictions, Stats and
// cancelled calls against one jitd for a bounded time. No unexpected error
// may occur, the daemon must stay healthy, what it holds (its heap in use,
// jitd_heap_allocated_bytes) must stay flat after the warm-up (within 10%
// and 1 MiB), and so must its resident memory (within 10%), and the cache
// must verify at the end.
//
// Under AddressSanitizer resident memory is not held to that bound, only
// printed: ASan keeps freed blocks in its quarantine (16 MiB in
// tests/sanitize.sh) until it is full, with their shadow, and keeps each
// size class's regions, so RSS climbs after the warm-up while the heap the
// daemon holds does not. Measured sanitized, 60 s: RSS 226.9 -> 239.4 MiB
// (+5.5%), heap in use 2.2 -> 2.3 MiB (+0.1 MiB); the growth is the
// allocator's, not jitd's. The heap bound holds in both builds.
//
// JITD_SOAK_SECONDS sets the duration (default 60, as CI runs it; an hour
// is JITD_SOAK_SECONDS=3600).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "generated_kernels.h"
#include "scrape.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using Clock = std::chrono::steady_clock;
using testing::ManyArchs;
using testing::ManyRequest;
using testing::TempDir;
using testing::TestDaemon;

constexpr int kValues = 48;
constexpr int kClients = 12;
constexpr int kHot = 8;  // instantiations most requests ask for

double ResidentMiB(int pid) {
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/statm").c_str(), "r");
  if (f == nullptr) return 0;
  long pages = 0, resident = 0;
  const int read = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return read == 2 ? static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20) : 0;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

TEST(Soak, MixedLoadHasNoErrorsAndFlatMemory) {
  const char* env = std::getenv("JITD_SOAK_SECONDS");
  const int seconds = env != nullptr && std::atoi(env) > 0 ? std::atoi(env) : 60;
  TempDir dir;
  testing::WriteManyKernelsTree(dir / "kernels", kValues);
  TestDaemon daemon(dir, {"--kernels", (dir / "kernels").string(), "--workers", "2", "--hot-cache-bytes", "256K",
                          "--max-cache-bytes", "2M", "--metrics-listen", "127.0.0.1:0"});
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  const std::optional<int> metrics_port = testing::MetricsPort(daemon);
  ASSERT_TRUE(metrics_port.has_value()) << daemon.process().Output();
  auto heap_mib = [&] {
    const std::optional<double> bytes = testing::Sample(testing::HttpGet(*metrics_port), "jitd_heap_allocated_bytes");
    return bytes.value_or(0) / (1 << 20);
  };

  std::atomic<bool> stop{false};
  std::mutex mu;
  std::map<std::string, uint64_t> outcomes;  // by kind of action and result
  std::vector<std::string> unexpected;
  auto count = [&](const std::string& what, const absl::Status& status, bool allowed_deadline) {
    std::lock_guard lock(mu);
    const bool fine =
        status.ok() || (allowed_deadline && (absl::IsDeadlineExceeded(status) || absl::IsCancelled(status)));
    std::string key = what;
    key += ' ';
    key += status.ok() ? std::string("ok") : absl::StatusCodeToString(status.code());
    ++outcomes[key];
    if (!fine && unexpected.size() < 20) {
      std::string line = what;
      line += ": ";
      line += status.ToString();
      unexpected.push_back(line);
    }
  };
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      std::mt19937 rng(static_cast<unsigned>(c) * 7919u + 1);
      std::unique_ptr<Client> client = daemon.Connect("", std::chrono::seconds(60));
      std::unique_ptr<Client> impatient = daemon.Connect("", std::chrono::milliseconds(15));
      const auto& archs = ManyArchs();
      while (!stop) {
        const unsigned roll = rng() % 100;
        if (roll < 60) {  // a hit, mostly
          count("hot get", client->GetKernel(ManyRequest(static_cast<int>(rng() % kHot), "sm_90")).status(), false);
        } else if (roll < 80) {  // a miss, often: compiles
          count("cold get",
                client->GetKernel(ManyRequest(static_cast<int>(rng() % kValues), archs[rng() % archs.size()])).status(),
                false);
        } else if (roll < 90) {  // given up on: the deadline cancels it
          count("impatient get",
                impatient->GetKernel(ManyRequest(static_cast<int>(rng() % kValues), archs[rng() % archs.size()]))
                    .status(),
                true);
        } else if (roll < 95) {  // evictions
          v1::EvictRequest evict;
          evict.set_arch(archs[rng() % archs.size()]);
          count("evict", client->Evict(evict).status(), false);
        } else {
          count("stats", client->Stats().status(), false);
        }
      }
    });
  }
  // Memory: sampled once a second; the first quarter is the warm-up.
  std::vector<double> after_warmup, at_end, heap_after_warmup, heap_at_end;
  const auto start = Clock::now();
  const int pid = daemon.process().pid();
  for (int s = 1; s <= seconds; ++s) {
    std::this_thread::sleep_until(start + std::chrono::seconds(s));  // the sampling clock
    const double rss = ResidentMiB(pid);
    const double heap = heap_mib();
    if (s > seconds / 4 && s <= seconds / 4 + 5) {
      after_warmup.push_back(rss);
      heap_after_warmup.push_back(heap);
    }
    if (s > seconds - 5) {
      at_end.push_back(rss);
      heap_at_end.push_back(heap);
    }
  }
  stop = true;
  for (std::thread& t : clients) t.join();

  uint64_t total = 0;
  for (const auto& [what, n] : outcomes) {
    std::printf("  %-28s %llu\n", what.c_str(), static_cast<unsigned long long>(n));
    total += n;
  }
  const double warm = Median(after_warmup), end = Median(at_end);
  const double heap_warm = Median(heap_after_warmup), heap_end = Median(heap_at_end);
  std::printf(
      "%d s, %d clients, %llu calls; daemon RSS %.1f MiB after the warm-up, %.1f MiB at the end; heap in use "
      "%.1f MiB after the warm-up, %.1f MiB at the end\n",
      seconds, kClients, static_cast<unsigned long long>(total), warm, end, heap_warm, heap_end);
  EXPECT_TRUE(unexpected.empty()) << unexpected.size() << " unexpected errors, first: " << unexpected.front();
  EXPECT_GT(outcomes["cold get ok"], 0u);
  EXPECT_GT(outcomes["evict ok"], 0u);
  EXPECT_GT(heap_warm, 0) << "jitd_heap_allocated_bytes was not scraped";
  // 10%, and 1 MiB of slack: the heap is a few MiB, and what is in flight
  // at a sample (12 clients' answers, gRPC's buffers) moves it by that much.
  EXPECT_LE(heap_end, heap_warm * 1.10 + 1.0)
      << "the heap the daemon holds grew by more than 10% (and 1 MiB) after the warm-up";
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_LE(end, warm * 1.10) << "resident memory grew by more than 10% after the warm-up";
#endif

  absl::StatusOr<bool> serving = daemon.Connect()->IsServing();
  ASSERT_TRUE(serving.ok() && *serving) << daemon.process().Output();
  v1::VerifyRequest verify;
  absl::StatusOr<v1::VerifyResponse> verified = daemon.Connect("", std::chrono::seconds(60))->Verify(verify);
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_EQ(verified->corrupt(), 0u);
}

}  // namespace
}  // namespace jitd
