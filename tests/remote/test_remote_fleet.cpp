// The fleet: several real jitd daemons, each with its own cache directory,
// sharing one real redis-server (--remote), as GPU nodes share one Redis.
//
//  * N daemons asked for the same cold key at the same moment compile it
//    once in total; the rest are answered from Redis (N = 2, then 8).
//  * A daemon with an empty disk is served from Redis, and keeps the entry.
//  * Redis killed mid-run and restarted: no request fails.
//  * Redis hung (SIGSTOP): requests still complete, in bounded time.
//  * A corrupted value in Redis is detected, never served, and replaced.
//  * A lease left by a daemon that died mid-compile is taken over.
//
// Each test prints the compile count it observed.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <barrier>
#include <fstream>
#include <thread>

#include "generated_kernels.h"
#include "kernel_fixtures.h"
#include "poll_until.h"
#include "redis_server.h"
#include "scrape.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using testing::RedisServer;
using testing::TempDir;
using testing::TestDaemon;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Fleet {
  // `n` daemons serving `kernels`, all behind `remote`.
  Fleet(int n, const std::filesystem::path& kernels, const std::string& remote, std::vector<std::string> extra = {}) {
    for (int i = 0; i < n; ++i) {
      dirs.push_back(std::make_unique<TempDir>());
      std::vector<std::string> args = {"--kernels", kernels.string(), "--workers", "1", "--remote", remote};
      args.insert(args.end(), extra.begin(), extra.end());
      daemons.push_back(std::make_unique<TestDaemon>(*dirs.back(), args));
    }
    for (auto& d : daemons) {
      absl::Status ready = d->WaitUntilServing();
      EXPECT_TRUE(ready.ok()) << ready;
    }
  }
  uint64_t Compiles() const {
    uint64_t total = 0;
    for (const auto& d : daemons) total += d->Stats().compiles();
    return total;
  }
  std::vector<std::unique_ptr<TempDir>> dirs;
  std::vector<std::unique_ptr<TestDaemon>> daemons;
};

class FleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::HaveRedisServer()) << "no redis-server: run deploy/install-deps.sh";
    redis_ = std::make_unique<RedisServer>(dir_ / "redis");
  }
  TempDir dir_;
  std::unique_ptr<RedisServer> redis_;
};

class SimultaneousTest : public FleetTest, public ::testing::WithParamInterface<int> {};

TEST_P(SimultaneousTest, OneCompileInTotalForAKeyEveryDaemonAsksForAtOnce) {
  const int n = GetParam();
  Fleet fleet(n, testing::SmallKernelsDir(), redis_->url());
  // A CUB kernel (about a second to compile): every request arrives while
  // the first compile is still running.
  const auto request = testing::KernelRequest("small.block_sum", {{"threads", "256"}});
  std::vector<absl::StatusOr<v1::GetKernelResponse>> answers(n, absl::UnknownError("not run"));
  std::vector<std::unique_ptr<Client>> clients;
  for (auto& d : fleet.daemons) clients.push_back(d->Connect("", 120s));
  std::barrier start(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      answers[i] = clients[i]->GetKernel(request);
    });
  }
  for (auto& t : threads) t.join();

  int compiled = 0, remote = 0;
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(answers[i].ok()) << "daemon " << i << ": " << answers[i].status();
    EXPECT_TRUE(answers[i]->cubin() == answers[0]->cubin()) << "daemon " << i << " got different bytes";
    if (answers[i]->source() == v1::GetKernelResponse::COMPILED) ++compiled;
    if (answers[i]->source() == v1::GetKernelResponse::REMOTE) ++remote;
  }
  const uint64_t compiles = fleet.Compiles();
  uint64_t waits = 0;
  for (const auto& d : fleet.daemons) waits += d->Stats().remote_waits();
  std::printf(
      "[fleet] %d daemons, one request each at once: %llu compile(s) in total, %d answered from Redis, %llu "
      "waited on another daemon's lease\n",
      n, static_cast<unsigned long long>(compiles), remote, static_cast<unsigned long long>(waits));
  EXPECT_EQ(compiles, 1u);
  EXPECT_EQ(compiled, 1);
  EXPECT_EQ(remote, n - 1);
  // Every daemon now has the entry on its own disk.
  for (const auto& d : fleet.daemons) EXPECT_EQ(d->Stats().entries(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Daemons, SimultaneousTest, ::testing::Values(2, 8),
                         [](const auto& p) { return std::to_string(p.param) + "Daemons"; });

TEST_F(FleetTest, ADaemonWithAnEmptyDiskIsServedFromRedis) {
  Fleet first(1, testing::SmallKernelsDir(), redis_->url());
  auto compiled = first.daemons[0]->Connect()->GetKernel(testing::KernelRequest("small.fill", {{"dtype", "fp32"}}));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ASSERT_EQ(compiled->source(), v1::GetKernelResponse::COMPILED);

  Fleet fresh(1, testing::SmallKernelsDir(), redis_->url());
  TestDaemon& d = *fresh.daemons[0];
  auto client = d.Connect();
  auto served = client->GetKernel(testing::KernelRequest("small.fill", {{"dtype", "fp32"}}));
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->source(), v1::GetKernelResponse::REMOTE);
  EXPECT_TRUE(served->cubin() == compiled->cubin());
  EXPECT_EQ(served->key(), compiled->key());
  ASSERT_EQ(served->symbols_size(), compiled->symbols_size());
  EXPECT_EQ(served->symbols(0).lowered_name(), compiled->symbols(0).lowered_name());
  auto again = client->GetKernel(testing::KernelRequest("small.fill", {{"dtype", "fp32"}}));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->source(), v1::GetKernelResponse::MEMORY);
  const v1::StatsResponse stats = d.Stats();
  std::printf("[fleet] fresh daemon: %llu compile(s), %llu remote hit(s)\n",
              static_cast<unsigned long long>(stats.compiles()), static_cast<unsigned long long>(stats.remote_hits()));
  EXPECT_EQ(stats.compiles(), 0u);
  EXPECT_EQ(stats.remote_hits(), 1u);
  EXPECT_EQ(stats.entries(), 1u) << "a remote hit is stored on the local disk";
  EXPECT_EQ(stats.remote(), redis_->url());

  // CACHED_ONLY never compiles, but another daemon's cubin is cached.
  Fleet cached_only(1, testing::SmallKernelsDir(), redis_->url());
  auto cached = cached_only.daemons[0]->Connect()->GetKernel(
      testing::KernelRequest("small.fill", {{"dtype", "fp32"}}, v1::GetKernelRequest::CACHED_ONLY));
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(cached->source(), v1::GetKernelResponse::REMOTE);
}

TEST_F(FleetTest, RedisKilledMidRunAndRestartedFailsNoRequest) {
  TempDir kernels;
  constexpr int kKeys = 48;
  testing::WriteManyKernelsTree(kernels.path(), kKeys);
  Fleet fleet(2, kernels.path(), redis_->url(), {"--remote-timeout-ms", "300"});
  std::atomic<int> next{0}, failed{0}, done{0};
  std::mutex errors_mu;
  std::vector<std::string> errors;
  // Two clients per daemon walk through the keys (cold misses that go to
  // Redis first) while the test kills and restarts Redis under them.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto client = fleet.daemons[t % 2]->Connect("", 60s);
      int n;
      while ((n = next.fetch_add(1)) < kKeys * 2) {
        auto got = client->GetKernel(testing::ManyRequest(n % kKeys, "sm_90"));
        if (!got.ok()) {
          ++failed;
          std::lock_guard lock(errors_mu);
          errors.push_back(std::string(got.status().message()));
        }
        ++done;
      }
    });
  }
  ASSERT_TRUE(testing::PollUntil([&] { return done.load() >= 8; }, 60s));
  redis_->Kill();
  const int at_kill = done.load();
  ASSERT_TRUE(testing::PollUntil([&] { return done.load() >= at_kill + 24; }, 60s))
      << "requests must go on while Redis is down";
  redis_->Restart();
  for (auto& t : threads) t.join();
  std::printf(
      "[fleet] Redis killed after %d requests and restarted after %d more: %d of %d requests failed, %llu "
      "compiles for %d keys\n",
      at_kill, 24, failed.load(), done.load(), static_cast<unsigned long long>(fleet.Compiles()), kKeys);
  EXPECT_EQ(failed.load(), 0) << (errors.empty() ? "" : errors[0]);
  uint64_t outages = 0;
  for (const auto& d : fleet.daemons) outages += d->Stats().remote_outages();
  EXPECT_GE(outages, 1u) << "the outage was noticed";
  // Once it is back, the fleet uses it again: a new key compiled on one
  // daemon reaches the other through Redis. Each daemon goes back to Redis
  // when its own breaker next probes it, up to breaker_max_open (30 s) after
  // its last failed probe: b's may still be open when a's has closed, and
  // then b compiles the key itself. So both are asked again, with new keys,
  // until one reaches b from Redis; the bound is far above the breaker's.
  auto& a = *fleet.daemons[0];
  auto& b = *fleet.daemons[1];
  int probe = -1;
  v1::GetKernelResponse::Source last = v1::GetKernelResponse::SOURCE_UNSPECIFIED;
  absl::Status last_error;
  const bool reached_b = testing::PollUntil(
      [&] {
        auto got = a.Connect()->GetKernel(testing::ManyRequest(++probe, "sm_100"));
        if (!got.ok()) return false;
        auto stored = redis_->Command({"EXISTS", "jitd:v1:blob:" + got->key()});
        if (!stored.ok() || stored->integer != 1) return false;
        auto via_redis = b.Connect()->GetKernel(testing::ManyRequest(probe, "sm_100"));
        last_error = via_redis.status();
        if (!via_redis.ok()) return false;
        last = via_redis->source();
        return last == v1::GetKernelResponse::REMOTE;
      },
      60s, 100ms);
  std::printf("[fleet] after the restart: a key compiled on one daemon reached the other from Redis at try %d\n",
              probe + 1);
  EXPECT_TRUE(reached_b) << "b never served a key from Redis after it came back; last answer "
                         << v1::GetKernelResponse::Source_Name(last) << ", " << last_error;
}

TEST_F(FleetTest, AHungRedisCostsBoundedTimeAndFailsNoRequest) {
  TempDir kernels;
  testing::WriteManyKernelsTree(kernels.path(), 8);
  Fleet fleet(1, kernels.path(), redis_->url(), {"--remote-timeout-ms", "200"});
  auto client = fleet.daemons[0]->Connect("", 60s);
  ASSERT_TRUE(client->GetKernel(testing::ManyRequest(0, "sm_90")).ok());
  redis_->Pause();
  auto start = Clock::now();
  for (int n = 1; n < 8; ++n) {
    auto got = client->GetKernel(testing::ManyRequest(n, "sm_90"));
    EXPECT_TRUE(got.ok()) << got.status();
  }
  auto took = Clock::now() - start;
  redis_->Resume();
  const v1::StatsResponse stats = fleet.daemons[0]->Stats();
  std::printf("[fleet] Redis hung: 7 cold requests took %.2f s in all, %llu remote errors, %llu skipped\n",
              std::chrono::duration<double>(took).count(), static_cast<unsigned long long>(stats.remote_errors()),
              static_cast<unsigned long long>(stats.remote_skipped()));
  EXPECT_TRUE(stats.remote_circuit_open() || stats.remote_outages() >= 1);
  // Three timeouts of 200 ms open the circuit; the compiles themselves are
  // ~25 ms each. Far below what seven full timeouts per request would cost.
  EXPECT_LT(took, 10s);
  // The breaker opens after 3 failures in a row; calls already waiting on
  // the store then (a write-back runs beside the next request's lookup)
  // fail too, and count, but nothing after them reaches the store.
  EXPECT_LE(stats.remote_errors(), 6u);
  EXPECT_GE(stats.remote_skipped(), 6u);
}

TEST_F(FleetTest, ACorruptedValueInRedisIsDetectedNotServedAndReplaced) {
  Fleet first(1, testing::SmallKernelsDir(), redis_->url());
  const auto request = testing::KernelRequest("small.scale", {{"clamp", "on"}});
  auto compiled = first.daemons[0]->Connect()->GetKernel(request);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const std::string redis_key = "jitd:v1:blob:" + compiled->key();
  // The write-back follows the answer: wait for the value to land.
  absl::StatusOr<cache::detail::RedisReply> value = absl::UnknownError("not read");
  ASSERT_TRUE(testing::PollUntil(
      [&] {
        value = redis_->Command({"GET", redis_key});
        return value.ok() && !value->str.empty();
      },
      30s))
      << "the compiled entry never reached Redis";
  std::string damaged = value->str;
  damaged[damaged.size() - 40] ^= 0x40;  // a bit inside the cubin or the checksum
  ASSERT_TRUE(redis_->Command({"SET", redis_key, damaged}).ok());

  Fleet second(1, testing::SmallKernelsDir(), redis_->url());
  auto served = second.daemons[0]->Connect()->GetKernel(request);
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->source(), v1::GetKernelResponse::COMPILED) << "the corrupt value must not be served";
  EXPECT_TRUE(served->cubin() == compiled->cubin());
  const v1::StatsResponse stats = second.daemons[0]->Stats();
  std::printf("[fleet] corrupt value: %llu detected, %llu compile(s) to replace it\n",
              static_cast<unsigned long long>(stats.remote_corrupt()),
              static_cast<unsigned long long>(stats.compiles()));
  EXPECT_EQ(stats.remote_corrupt(), 1u);
  EXPECT_EQ(stats.compiles(), 1u);
  // Replaced by the second daemon's write-back, which follows its answer.
  EXPECT_TRUE(testing::PollUntil(
      [&] {
        auto replaced = redis_->Command({"GET", redis_key});
        return replaced.ok() && !replaced->str.empty() && replaced->str != damaged;
      },
      30s))
      << "the corrupt value stayed in Redis";
  // The value written back is good: a third daemon is served from it.
  Fleet third(1, testing::SmallKernelsDir(), redis_->url());
  auto from_redis = third.daemons[0]->Connect()->GetKernel(request);
  ASSERT_TRUE(from_redis.ok()) << from_redis.status();
  EXPECT_EQ(from_redis->source(), v1::GetKernelResponse::REMOTE);
  EXPECT_TRUE(from_redis->cubin() == compiled->cubin());
}

// Resident memory of process `pid` in MiB (VmRSS), 0 when it is gone.
double RssMiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024;
  }
  return 0;
}

// Three small instantiations, and the content keys a daemon of its own
// (no Redis) gives them: what a writer of the store would plant under.
std::vector<v1::GetKernelRequest> ThreeSmallRequests() {
  return {testing::KernelRequest("small.fill", {{"dtype", "fp32"}}),
          testing::KernelRequest("small.fill", {{"dtype", "fp64"}}),
          testing::KernelRequest("small.scale", {{"clamp", "on"}})};
}

std::vector<std::string> KeysOf(const std::vector<v1::GetKernelRequest>& requests) {
  TempDir solo;
  TestDaemon d(solo, {"--kernels", testing::SmallKernelsDir().string()});
  std::vector<std::string> keys;
  if (!d.WaitUntilServing().ok()) return keys;
  for (const auto& request : requests) {
    auto resolved = d.Connect()->GetKernel(request);
    EXPECT_TRUE(resolved.ok()) << resolved.status();
    if (resolved.ok()) keys.push_back(resolved->key());
  }
  return keys;
}

TEST_F(FleetTest, HugeValuesPlantedInRedisAreRefusedUnreadAndCostNoMemory) {
  // A writer of the store plants 40 MiB under the keys three requests ask
  // for; the daemon reads at most --remote-max-value-bytes of each.
  const std::vector<v1::GetKernelRequest> requests = ThreeSmallRequests();
  const std::vector<std::string> keys = KeysOf(requests);
  ASSERT_EQ(keys.size(), requests.size());
  for (const std::string& key : keys) {
    ASSERT_TRUE(redis_->Command({"SET", "jitd:v1:blob:" + key, std::string(40 << 20, 'x')}).ok());
  }
  Fleet fleet(1, testing::SmallKernelsDir(), redis_->url(), {"--remote-max-value-bytes", "1M"});
  TestDaemon& daemon = *fleet.daemons[0];
  ASSERT_TRUE(daemon.Connect()->GetKernel(testing::KernelRequest("small.scale", {{"clamp", "off"}})).ok());
  const double before = RssMiB(daemon.process().pid());
  std::vector<std::thread> threads;
  std::vector<absl::StatusOr<v1::GetKernelResponse>> answers(requests.size(), absl::UnknownError("not run"));
  for (size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back([&, i] { answers[i] = daemon.Connect("", 60s)->GetKernel(requests[i]); });
  }
  for (auto& t : threads) t.join();
  const double after = RssMiB(daemon.process().pid());
  for (const auto& answer : answers) {
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->source(), v1::GetKernelResponse::COMPILED);
  }
  const v1::StatsResponse stats = daemon.Stats();
  std::printf("[fleet] 3 x 40 MiB planted: %llu refused unread, RSS %.1f -> %.1f MiB\n",
              static_cast<unsigned long long>(stats.remote_oversized()), before, after);
  EXPECT_EQ(stats.remote_oversized(), 3u);
  EXPECT_EQ(stats.remote_errors(), 0u) << "a value too large is not an outage";
  EXPECT_LT(after - before, 40.0) << "one planted value read whole would add 40 MiB or more";
  // Asked again (memory and disk answer now): nothing more is read.
  for (const auto& request : requests) ASSERT_TRUE(daemon.Connect()->GetKernel(request).ok());
  EXPECT_EQ(daemon.Stats().remote_oversized(), 3u);
}

TEST_F(FleetTest, WaitsOnOtherDaemonsLeasesCountAgainstTheQueue) {
  // Three keys whose leases another daemon holds (and keeps, for a minute):
  // with --max-queue 2, two requests wait on them; the third is refused at
  // once instead of holding a third wait.
  const std::vector<v1::GetKernelRequest> requests = ThreeSmallRequests();
  const std::vector<std::string> keys = KeysOf(requests);
  ASSERT_EQ(keys.size(), requests.size());
  for (const std::string& key : keys) {
    ASSERT_TRUE(redis_->Command({"SET", "jitd:v1:lease:" + key, "busy-node:1:00", "PX", "60000"}).ok());
  }
  Fleet fleet(1, testing::SmallKernelsDir(), redis_->url(), {"--max-queue", "2"});
  TestDaemon& daemon = *fleet.daemons[0];
  std::vector<std::thread> waiting;
  for (size_t i = 0; i < 2; ++i) {
    waiting.emplace_back([&, i] {
      auto answer = daemon.Connect("", 3s)->GetKernel(requests[i]);
      EXPECT_EQ(answer.status().code(), absl::StatusCode::kDeadlineExceeded) << answer.status();
    });
  }
  ASSERT_TRUE(testing::PollUntil([&] { return daemon.Stats().remote_waits() == 2; }, 10s));
  auto refused = daemon.Connect("", 10s)->GetKernel(requests[2]);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(refused.status().message().find("waiting for a worker or for another daemon's compile"), std::string::npos)
      << refused.status();
  for (auto& t : waiting) t.join();
}

TEST_F(FleetTest, ALeaseLeftByADaemonThatDiedIsTakenOver) {
  const auto request = testing::KernelRequest("small.fill", {{"dtype", "fp64"}});
  std::string key;
  {
    TempDir solo;
    TestDaemon d(solo, {"--kernels", testing::SmallKernelsDir().string()});
    ASSERT_TRUE(d.WaitUntilServing().ok());
    auto got = d.Connect()->GetKernel(request);
    ASSERT_TRUE(got.ok()) << got.status();
    key = got->key();
  }
  Fleet fleet(1, testing::SmallKernelsDir(), redis_->url());
  // What a daemon SIGKILLed mid-compile leaves: a lease nobody renews.
  // Planted once the daemon serves, so that its start does not eat into
  // the 3 s the lease has left (a request stalled that long on a loaded
  // machine would find it gone and never wait).
  auto start = Clock::now();
  ASSERT_TRUE(redis_->Command({"SET", "jitd:v1:lease:" + key, "dead-node:4242:00", "PX", "3000"}).ok());
  auto got = fleet.daemons[0]->Connect("", 60s)->GetKernel(request);
  auto took = Clock::now() - start;
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->source(), v1::GetKernelResponse::COMPILED);
  const v1::StatsResponse stats = fleet.daemons[0]->Stats();
  EXPECT_EQ(stats.remote_waits(), 1u);
  EXPECT_EQ(stats.remote_takeovers(), 1u);
  EXPECT_GE(took, 2s) << "it waited for the lease to lapse";
  // The write-back and the lease's release follow the answer, in that order.
  EXPECT_TRUE(testing::PollUntil(
      [&] {
        auto lease = redis_->Command({"EXISTS", "jitd:v1:lease:" + key});
        return lease.ok() && lease->integer == 0;
      },
      30s))
      << "its own lease is released";
  EXPECT_EQ(redis_->Command({"EXISTS", "jitd:v1:blob:" + key})->integer, 1);
}

TEST_F(FleetTest, ACompileFailureIsSharedByTheFleet) {
  Fleet fleet(2, testing::SmallKernelsDir(), redis_->url());
  auto first = fleet.daemons[0]->Connect()->GetKernel(testing::KernelRequest("small.broken"));
  ASSERT_TRUE(absl::IsFailedPrecondition(first.status())) << first.status();
  auto second = fleet.daemons[1]->Connect()->GetKernel(testing::KernelRequest("small.broken"));
  ASSERT_TRUE(absl::IsFailedPrecondition(second.status())) << second.status();
  EXPECT_NE(std::string(second.status().message()).find("undeclared"), std::string::npos) << second.status();
  EXPECT_EQ(fleet.daemons[1]->Stats().compiles(), 0u) << "the second daemon did not recompile a broken kernel";
  EXPECT_EQ(fleet.daemons[1]->Stats().remote_failures_shared(), 1u);
}

TEST_F(FleetTest, WithASigningKeyTheFleetServesOnlyWhatItSigned) {
  testing::WriteFile(dir_ / "fleet.key", "3f1c9a7e0b2d4c6a8e1f3b5d7c9a0e2f\n");
  const std::vector<std::string> keyed = {"--remote-signing-key-file", (dir_ / "fleet.key").string()};
  // Someone who can write Redis but has no key (a daemon without one).
  Fleet outsider(1, testing::SmallKernelsDir(), redis_->url());
  const auto request = testing::KernelRequest("small.fill", {{"dtype", "fp32"}});
  ASSERT_TRUE(outsider.daemons[0]->Connect()->GetKernel(request).ok());

  Fleet fleet(2, testing::SmallKernelsDir(), redis_->url(), keyed);
  auto first = fleet.daemons[0]->Connect()->GetKernel(request);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->source(), v1::GetKernelResponse::COMPILED) << "an unsigned value was served";
  EXPECT_EQ(fleet.daemons[0]->Stats().remote_corrupt(), 1u);
  // The signed write-back follows the answer, then the lease goes. Asked
  // before it lands, daemon 1 would still read the outsider's value, refuse
  // it and not read the key again a while (it would compile it itself).
  ASSERT_TRUE(testing::PollUntil(
      [&] {
        auto lease = redis_->Command({"EXISTS", "jitd:v1:lease:" + first->key()});
        return lease.ok() && lease->integer == 0;
      },
      30s))
      << "daemon 0 never released its lease";
  auto second = fleet.daemons[1]->Connect()->GetKernel(request);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->source(), v1::GetKernelResponse::REMOTE) << "the fleet shares what it signed";
  EXPECT_TRUE(second->cubin() == first->cubin());

  testing::WriteFile(dir_ / "short.key", "too short\n");
  TempDir bad;
  std::vector<std::string> args = TestDaemon::DefaultArgs(bad);
  args.insert(args.end(), {"--kernels", testing::SmallKernelsDir().string(), "--remote", redis_->url(),
                           "--remote-signing-key-file", (dir_ / "short.key").string()});
  auto refused = testing::RunProcess(args, bad / "jitd.log", std::chrono::seconds(30));
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("at least 16"), std::string::npos) << refused.output;
}

#ifdef JITD_MODULE_TREE_DIR
// A module kernel (a tvm-ffi shared object: code the client runs) goes
// through Redis only signed. Unsigned, each daemon builds its own (nothing
// is stored, and nothing found would be served); signed, two daemons
// asking at once make one build, the other answered from Redis.
TEST_F(FleetTest, AModuleIsSharedOnlySignedAndThenBuiltOnceForTwoDaemons) {
  const std::vector<std::string> sm90a = {"--arch", "sm_90a"};
  const auto unsigned_request = testing::KernelRequest("activation.silu_and_mul", {{"dtype", "bf16"}});
  {
    Fleet fleet(2, JITD_MODULE_TREE_DIR, redis_->url(), sm90a);
    auto first = fleet.daemons[0]->Connect("", 300s)->GetKernel(unsigned_request);
    ASSERT_TRUE(first.ok()) << first.status();
    auto second = fleet.daemons[1]->Connect("", 300s)->GetKernel(unsigned_request);
    ASSERT_TRUE(second.ok()) << second.status();
    EXPECT_EQ(second->source(), v1::GetKernelResponse::COMPILED) << "an unsigned module went through Redis";
    EXPECT_EQ(fleet.Compiles(), 2u);
  }
  testing::WriteFile(dir_ / "fleet.key", "3f1c9a7e0b2d4c6a8e1f3b5d7c9a0e2f\n");
  std::vector<std::string> keyed = sm90a;
  keyed.insert(keyed.end(), {"--remote-signing-key-file", (dir_ / "fleet.key").string()});
  Fleet fleet(2, JITD_MODULE_TREE_DIR, redis_->url(), keyed);
  const auto request = testing::KernelRequest("activation.silu_and_mul", {{"dtype", "fp16"}});
  std::vector<absl::StatusOr<v1::GetKernelResponse>> answers(2, absl::UnknownError("not run"));
  std::barrier start(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      std::unique_ptr<Client> client = fleet.daemons[i]->Connect("", 300s);
      start.arrive_and_wait();
      answers[i] = client->GetKernel(request);
    });
  }
  for (auto& t : threads) t.join();
  int remote = 0;
  for (const auto& answer : answers) {
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_TRUE(answer->cubin() == answers[0]->cubin());
    remote += answer->source() == v1::GetKernelResponse::REMOTE ? 1 : 0;
  }
  std::printf("[fleet] 2 daemons, one module asked at once, signed: %llu build(s), %d answered from Redis\n",
              static_cast<unsigned long long>(fleet.Compiles()), remote);
  EXPECT_EQ(fleet.Compiles(), 1u);
  EXPECT_EQ(remote, 1);

  // A daemon without the key finds the signed module in Redis, refuses it
  // (it cannot verify code) and builds its own, and Stats says so.
  Fleet keyless(1, JITD_MODULE_TREE_DIR, redis_->url(), sm90a);
  auto own = keyless.daemons[0]->Connect("", 300s)->GetKernel(request);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->source(), v1::GetKernelResponse::COMPILED);
  EXPECT_EQ(keyless.daemons[0]->Stats().remote_unsigned_modules(), 1u);
  EXPECT_EQ(fleet.daemons[0]->Stats().remote_unsigned_modules(), 0u);
}
#endif

TEST_F(FleetTest, MetricsShowTheRemoteTier) {
  Fleet fleet(2, testing::SmallKernelsDir(), redis_->url(), {"--metrics-listen", "127.0.0.1:0"});
  const auto request = testing::KernelRequest("small.fill", {{"dtype", "fp64"}});
  ASSERT_TRUE(fleet.daemons[0]->Connect()->GetKernel(request).ok());
  ASSERT_TRUE(fleet.daemons[1]->Connect()->GetKernel(request).ok());
  auto port = testing::MetricsPort(*fleet.daemons[1]);
  ASSERT_TRUE(port.has_value());
  const std::string body = testing::HttpGet(*port);
  EXPECT_EQ(testing::Sample(body, R"(jitd_requests_total{outcome="ok",source="remote"})"), 1) << body;
  EXPECT_EQ(testing::Sample(body, R"(jitd_remote_requests_total{op="get",result="hit"})"), 1);
  EXPECT_EQ(testing::Sample(body, "jitd_remote_circuit_open"), 0);
  EXPECT_EQ(testing::Sample(body, "jitd_remote_errors_total"), 0);
  EXPECT_FALSE(testing::Sample(body, R"(jitd_compiles_total{result="ok"})").has_value()) << "daemon 1 compiled";
  redis_->Kill();
  for (int n = 0; n < 2; ++n) {
    auto got =
        fleet.daemons[1]->Connect()->GetKernel(testing::KernelRequest("small.scale", {{"clamp", n ? "on" : "off"}}));
    ASSERT_TRUE(got.ok()) << got.status();
  }
  const std::string after = testing::HttpGet(*port);
  EXPECT_GE(testing::Sample(after, "jitd_remote_errors_total").value_or(0), 1.0) << after;
}

}  // namespace
}  // namespace jitd
