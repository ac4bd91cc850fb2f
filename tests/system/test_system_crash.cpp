// Crash consistency: jitd killed with SIGKILL at random moments while
// clients ask it for compiles and hits, restarted each time, many times.
// After every restart, what it answered before the kill must still be a
// hit; at the end the cache must open cleanly, every entry must pass its
// checksum and equal a fresh compile of its key byte for byte, and no
// temporary file may be left. bazel-remote's kill -9 system test asks for
// a 95% hit rate after the kills; jitd publishes (fsync, rename, fsync,
// index) before it answers, so it must keep every answered entry.
//
// JITD_CRASH_KILLS sets the number of kills (default 200, as CI runs it);
// JITD_CRASH_SEED fixes the random moments (printed at the start).
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "compiler/nvrtc_program.h"
#include "generated_kernels.h"
#include "jitd/cache.h"
#include "manifest/manifest.h"
#include "test_daemon.h"

namespace jitd {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::TestDaemon;

constexpr int kValues = 64;  // instantiations per arch

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : fallback;
}

struct Spec {
  int n;
  std::string arch;
  bool operator<(const Spec& o) const { return std::tie(n, arch) < std::tie(o.n, o.arch); }
};

v1::GetKernelRequest RequestFor(const Spec& spec, v1::GetKernelRequest::Mode mode) {
  return testing::ManyRequest(spec.n, spec.arch, mode);
}

TEST(Crash, SigkillAtRandomMomentsLosesNothingAnsweredAndServesNothingCorrupt) {
  const int kills = EnvInt("JITD_CRASH_KILLS", 200);
  const unsigned seed = static_cast<unsigned>(EnvInt("JITD_CRASH_SEED", static_cast<int>(std::random_device{}() >> 1)));
  std::printf("kills: %d, seed: %u (JITD_CRASH_SEED=%u repeats this run)\n", kills, seed, seed);
  std::mt19937 rng(seed);
  TempDir dir;
  const fs::path kernels = dir / "kernels";
  testing::WriteManyKernelsTree(kernels, kValues);

  std::set<Spec> answered;  // answered with a cubin before some kill
  size_t checked = 0, still_hits = 0, compiled_answers = 0;
  for (int kill = 0; kill < kills; ++kill) {
    TestDaemon daemon(dir, {"--kernels", kernels.string(), "--workers", "2", "--hot-cache-bytes", "0"});
    ASSERT_TRUE(daemon.WaitUntilServing().ok()) << "restart " << kill << ": " << daemon.process().Output();
    // Everything answered before the earlier kills must still be there.
    {
      std::unique_ptr<Client> client = daemon.Connect("", std::chrono::seconds(10));
      for (const Spec& spec : answered) {
        absl::StatusOr<v1::GetKernelResponse> r =
            client->GetKernel(RequestFor(spec, v1::GetKernelRequest::CACHED_ONLY));
        ++checked;
        if (r.ok()) {
          ++still_hits;
        } else {
          ADD_FAILURE() << "after kill " << kill << ": " << spec.arch << " n=" << spec.n
                        << " was answered before and is gone: " << r.status();
        }
      }
    }
    // Two clients ask for random instantiations (new ones compile, known
    // ones hit) until the daemon is killed at a random moment.
    std::atomic<bool> stop{false};
    std::mutex mu;
    std::vector<std::thread> clients;
    for (int c = 0; c < 2; ++c) {
      clients.emplace_back([&, c, client_seed = rng()] {
        std::mt19937 mine(client_seed);
        std::unique_ptr<Client> client = daemon.Connect("", std::chrono::seconds(10));
        while (!stop) {
          const Spec spec{static_cast<int>(mine() % kValues),
                          testing::ManyArchs()[mine() % testing::ManyArchs().size()]};
          absl::StatusOr<v1::GetKernelResponse> r = client->GetKernel(RequestFor(spec, v1::GetKernelRequest::COMPILE));
          if (!r.ok()) continue;  // killed under it: UNAVAILABLE, CANCELLED
          std::lock_guard lock(mu);
          answered.insert(spec);
          compiled_answers += r->source() == v1::GetKernelResponse::COMPILED;
        }
        (void)c;
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 200));  // the random moment
    daemon.process().Signal(SIGKILL);
    ASSERT_TRUE(daemon.process().WaitForExit(testing::kProcessTimeout).has_value());
    stop = true;
    for (std::thread& t : clients) t.join();
  }
  std::printf(
      "%d kills; %zu entries answered before a kill; %zu compiles answered; re-checked %zu times after "
      "restarts, %zu hits (%.1f%%)\n",
      kills, answered.size(), compiled_answers, checked, still_hits,
      checked ? 100.0 * static_cast<double>(still_hits) / static_cast<double>(checked) : 100.0);
  EXPECT_GT(compiled_answers, 0u) << "no compile was answered: the kills came too early to test anything";
  if (checked > 0) {
    EXPECT_GE(static_cast<double>(still_hits) / static_cast<double>(checked), 0.95);
  }

  // The cache after the last kill: opens, every entry verifies, no temp
  // files, and each cubin is what a fresh compile of its key gives.
  cache::CacheOptions options;
  options.dir = dir / "cache";
  auto opened = cache::Cache::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status();
  cache::Cache& c = **opened;
  // The open's reconcile first, as the daemon runs it in the background
  // after opening: a kill between a blob's rename and its row leaves a
  // blob without a row, which that reconcile indexes (Verify before it
  // would report the blob, depending on which ran first).
  ASSERT_TRUE(c.Flush().ok());
  absl::StatusOr<cache::VerifyReport> report = c.Verify(/*repair=*/false);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->problems.empty()) << report->problems.front();
  size_t temp_files = 0;
  for (const auto& e : fs::directory_iterator(dir / "cache" / "tmp")) temp_files += e.is_regular_file();
  EXPECT_EQ(temp_files, 0u);

  auto toolchain = manifest::Toolchain::Detect();
  ASSERT_TRUE(toolchain.ok());
  auto tree = manifest::KernelTree::Load(kernels);
  ASSERT_TRUE(tree.ok());
  auto resolver = manifest::Resolver::Create(*tree, *toolchain, "sm_90");
  ASSERT_TRUE(resolver.ok());
  size_t compared = 0;
  for (const Spec& spec : answered) {
    auto resolved = (*resolver)->Resolve({"many.fill", {{"n", testing::ManyValue(spec.n)}}, spec.arch, {}});
    ASSERT_TRUE(resolved.ok()) << resolved.status();
    absl::StatusOr<cache::Entry> entry = c.Lookup(resolved->key);
    ASSERT_TRUE(entry.ok()) << spec.arch << " n=" << spec.n << ": " << entry.status();
    absl::StatusOr<compiler::CompileResult> fresh = compiler::CompileInProcess(resolved->job, nullptr, nullptr);
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    EXPECT_EQ(entry->cubin, fresh->cubin) << spec.arch << " n=" << spec.n << " differs from a fresh compile";
    ++compared;
  }
  std::printf("%zu entries compared with a fresh compile: identical\n", compared);
}

}  // namespace
}  // namespace jitd
