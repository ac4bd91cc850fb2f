// Bounded under hostile load: what one request may cost the real daemon in
// threads, whoever sends it, and that running out of them is survived.
// (The request-size caps are cases of test_daemon_hostile.cpp.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <latch>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cgroup.h"
#include "kernel_fixtures.h"
#include "poll_until.h"
#include "small_daemon_test.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using testing::Cgroup;
using testing::kCompileCallTimeout;
using testing::KernelRequest;

// Threads of process `pid` now (its /proc status), 0 when it is gone.
int ThreadsOf(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return 0;
}

// `count` distinct instantiations of small.fill: each its own -D macro, so
// each is its own key and its own compile.
v1::WarmRequest DistinctFills(int count, const std::string& tag) {
  v1::WarmRequest request;
  for (int i = 0; i < count; ++i) {
    v1::KernelSpec* spec = request.add_specs();
    spec->set_kernel("small.fill");
    (*spec->mutable_params())["dtype"] = "fp32";
    spec->add_options("-D" + tag + "_" + std::to_string(i));
  }
  return request;
}

class Bounded : public testing::SmallDaemonTest {
 protected:
  // Warms `request` to the end; the last progress message.
  absl::StatusOr<v1::WarmProgress> Warm(const v1::WarmRequest& request) { return client_->Warm(request, nullptr); }
};

TEST_F(Bounded, AWarmOfSixtyFourAtATimeStartsNoThreadPerItem) {
  Start();
  // A first call starts what gRPC starts for a streaming call.
  absl::StatusOr<v1::WarmProgress> first = Warm(DistinctFills(2, "FIRST"));
  ASSERT_TRUE(first.ok()) << first.status() << "\n" << daemon_->process().Output();
  const pid_t pid = daemon_->process().pid();
  const int before = ThreadsOf(pid);
  ASSERT_GT(before, 0);

  std::atomic<bool> warming{true};
  std::atomic<int> most{before};
  std::thread sampler([&] {
    while (warming) {
      most = std::max(most.load(), ThreadsOf(pid));
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  v1::WarmRequest request = DistinctFills(64, "SIXTYFOUR");
  request.set_concurrency(64);
  absl::StatusOr<v1::WarmProgress> last = Warm(request);
  warming = false;
  sampler.join();
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->done(), 64u);
  EXPECT_EQ(last->failed(), 0u);
  // It used to start 63 threads; a stray thread of gRPC's or two may come.
  EXPECT_LE(most.load(), before + 4) << "threads before: " << before;
}

// A fresh client connects on its first call, and that call waits for the
// connection as long as it takes. On a loaded machine the daemon may take
// far more than a tenth of a second to answer a connection (here it is
// stopped for 1.5 s); a client that gave each connection attempt 100 ms
// failed its first call UNAVAILABLE, as the first Warm of the pids test
// below once did in a full parallel run of the suite.
TEST_F(Bounded, AFreshClientsFirstCallWaitsForADaemonSlowToTakeItsConnection) {
  Start();
  const pid_t pid = daemon_->process().pid();
  std::unique_ptr<Client> fresh = daemon_->Connect("", kCompileCallTimeout);  // it connects on its first call
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  std::thread resume([pid] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    kill(pid, SIGCONT);
  });
  absl::StatusOr<v1::WarmProgress> first = fresh->Warm(DistinctFills(2, "SLOW"), nullptr);
  resume.join();
  ASSERT_TRUE(first.ok()) << first.status() << "\n" << daemon_->process().Output();
  EXPECT_EQ(first->done(), 2u);
  EXPECT_EQ(first->failed(), 0u);
}

TEST_F(Bounded, UnderAPidsLimitAWideWarmNeitherKillsNorWedgesTheDaemon) {
  absl::StatusOr<Cgroup> cgroup = Cgroup::Create("pids", "jitd-bounded-" + std::to_string(getpid()));
  if (!cgroup.ok()) GTEST_SKIP() << "needs a writable pids cgroup (root): " << cgroup.status();
  Start();
  absl::StatusOr<v1::WarmProgress> first = Warm(DistinctFills(2, "FIRST"));
  ASSERT_TRUE(first.ok()) << first.status() << "\n" << daemon_->process().Output();
  const pid_t pid = daemon_->process().pid();
  // The daemon (its threads; its workers stay outside) with a little room,
  // as a pod's or a unit's TasksMax would leave it.
  ASSERT_TRUE(cgroup->Add(pid).ok());
  const int threads = ThreadsOf(pid);
  ASSERT_TRUE(cgroup->Set("pids.max", std::to_string(threads + 6)).ok());

  v1::WarmRequest request = DistinctFills(63, "PIDS");
  request.set_concurrency(63);
  absl::StatusOr<v1::WarmProgress> last = Warm(request);
  ASSERT_TRUE(last.ok()) << last.status() << "\n" << daemon_->process().Output();
  EXPECT_EQ(last->done(), 63u);
  EXPECT_EQ(last->failed(), 0u);
  // Alive, and every key answers: none was left registered and unfinished.
  absl::StatusOr<v1::GetKernelResponse> again = client_->GetKernel([] {
    v1::GetKernelRequest r = KernelRequest("small.fill", {{"dtype", "fp32"}});
    r.add_options("-DPIDS_7");
    return r;
  }());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NE(again->source(), v1::GetKernelResponse::COMPILED);
  EXPECT_FALSE(daemon_->process().Exited());
}

TEST_F(Bounded, TheCacheItMakesIsItsUsersAlone) {
  Start();
  ASSERT_TRUE(client_->GetKernel(KernelRequest("small.fill", {{"dtype", "fp32"}})).ok());
  // Blobs, the index and its journal, memos, locks: nothing for others.
  std::vector<std::string> open_to_others;
  size_t files = 0;
  const std::filesystem::path root = daemon_->cache_dir();
  auto check = [&](const std::filesystem::path& path) {
    struct stat info {};
    ASSERT_EQ(::lstat(path.c_str(), &info), 0) << path;
    const mode_t mode = info.st_mode & 07777;
    if ((mode & 077) != 0) open_to_others.push_back(path.string() + " " + std::to_string(mode));
    files += S_ISREG(info.st_mode) ? 1 : 0;
  };
  check(root);
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) check(entry.path());
  EXPECT_TRUE(open_to_others.empty()) << ::testing::PrintToString(open_to_others);
  EXPECT_GE(files, 3u);  // a blob, the index, the lock at least
}

// A PREFETCH of small.block_sum (the CUB kernel, about a second a compile)
// under its own -D macro: a distinct key that stays queued a while.
v1::GetKernelRequest ChurnPrefetch(int i) {
  v1::GetKernelRequest request = KernelRequest("small.block_sum", {{"threads", "256"}}, v1::GetKernelRequest::PREFETCH);
  request.add_options("-DCHURN_" + std::to_string(i));
  return request;
}

TEST_F(Bounded, APrefetchFloodIsRefusedAndNeverRefusesARequestThatWaits) {
  Start({"--workers", "1", "--max-queue", "4"});
  // Half of --max-queue (2) is what prefetches may hold; the rest answer
  // RESOURCE_EXHAUSTED at once (a refused PREFETCH once answered OK).
  int accepted = 0, refused = 0;
  for (int i = 0; i < 6; ++i) {
    absl::StatusOr<v1::GetKernelResponse> answer = client_->GetKernel(ChurnPrefetch(i));
    if (answer.ok()) {
      ++accepted;
      continue;
    }
    ++refused;
    EXPECT_EQ(answer.status().code(), absl::StatusCode::kResourceExhausted) << answer.status();
    EXPECT_THAT(std::string(answer.status().message()), ::testing::HasSubstr("PREFETCH refused"));
  }
  EXPECT_EQ(accepted, 2);
  EXPECT_EQ(refused, 4);
  // Another client's real request still gets in and is answered.
  absl::StatusOr<v1::GetKernelResponse> honest = client_->GetKernel(KernelRequest("small.fill", {{"dtype", "fp32"}}));
  ASSERT_TRUE(honest.ok()) << honest.status();
  EXPECT_EQ(honest->source(), v1::GetKernelResponse::COMPILED);
  EXPECT_EQ(daemon_->Stats().prefetches_refused(), 4u);
}

TEST_F(Bounded, AChurnOfAdHocKeysNeverEvictsWhatAWarmUpPut) {
  // A budget of a few small cubins; the warmed four must survive forty
  // ad-hoc -D keys and a restart, as a strict server (CACHED_ONLY) needs.
  Start({"--max-cache-bytes", "48K"});
  v1::WarmRequest warm;
  for (const char* dtype : {"fp32", "fp64"}) {
    v1::KernelSpec* spec = warm.add_specs();
    spec->set_kernel("small.fill");
    (*spec->mutable_params())["dtype"] = dtype;
  }
  for (const char* clamp : {"off", "on"}) {
    v1::KernelSpec* spec = warm.add_specs();
    spec->set_kernel("small.scale");
    (*spec->mutable_params())["clamp"] = clamp;
  }
  ASSERT_TRUE(Warm(warm).ok());
  EXPECT_EQ(daemon_->Stats().pinned_entries(), 4u);
  for (int i = 0; i < 40; ++i) {
    v1::GetKernelRequest junk = KernelRequest("small.fill", {{"dtype", "fp32"}});
    junk.add_options("-DJUNK_" + std::to_string(i));
    ASSERT_TRUE(client_->GetKernel(junk).ok()) << i;
  }
  // The budget held: ad-hoc entries went, pinned ones stayed.
  ASSERT_TRUE(testing::PollUntil([&] { return daemon_->Stats().bytes() <= (48u << 10); }, testing::kProcessTimeout))
      << daemon_->Stats().DebugString();
  EXPECT_EQ(daemon_->Stats().pinned_entries(), 4u);
  Start({"--max-cache-bytes", "48K"});  // a restart: the memory tier is empty
  for (const v1::KernelSpec& spec : warm.specs()) {
    v1::GetKernelRequest request =
        KernelRequest(spec.kernel(), {spec.params().begin(), spec.params().end()}, v1::GetKernelRequest::CACHED_ONLY);
    absl::StatusOr<v1::GetKernelResponse> kept = client_->GetKernel(request);
    EXPECT_TRUE(kept.ok()) << spec.ShortDebugString() << ": " << kept.status();
  }
  // An operator may still remove them, on purpose.
  std::unique_ptr<Client> admin = daemon_->Connect(*ReadSocketAdminToken(daemon_->socket_path()), kCompileCallTimeout);
  v1::EvictRequest evict;
  evict.set_kernel_glob("small.*");
  ASSERT_TRUE(admin->Evict(evict).ok());  // the ad-hoc entries left
  EXPECT_EQ(daemon_->Stats().entries(), 4u);
  EXPECT_EQ(daemon_->Stats().pinned_entries(), 4u) << "pinned entries are kept by default";
  evict.set_include_pinned(true);
  EXPECT_EQ(admin->Evict(evict)->evicted_entries(), 4u);
  EXPECT_EQ(daemon_->Stats().entries(), 0u);
}

}  // namespace
}  // namespace jitd

namespace jitd {
namespace {

TEST_F(Bounded, AFullVerifyWithoutTheTokenRunsOncePerMinute) {
  // Verify re-reads every blob: open to every client, so bounded for them.
  Start();
  ASSERT_TRUE(client_->GetKernel(KernelRequest("small.fill", {{"dtype", "fp32"}})).ok());
  ClientOptions options;
  options.endpoint = daemon_->endpoint();
  options.read_socket_admin_token = false;  // a member of the socket's group, not the daemon's user
  options.call_timeout = kCompileCallTimeout;
  std::unique_ptr<Client> member = *Client::Connect(options);
  absl::StatusOr<v1::VerifyResponse> first = member->Verify(v1::VerifyRequest());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->checked(), 1u);
  absl::StatusOr<v1::VerifyResponse> again = member->Verify(v1::VerifyRequest());
  ASSERT_EQ(again.status().code(), absl::StatusCode::kResourceExhausted) << again.status();
  EXPECT_THAT(std::string(again.status().message()),
              ::testing::ContainsRegex("without the admin token one may run per 60 s: retry in [0-9]+ s"));
  // The operator is not held to it.
  std::unique_ptr<Client> admin = daemon_->Connect(*ReadSocketAdminToken(daemon_->socket_path()), kCompileCallTimeout);
  EXPECT_TRUE(admin->Verify(v1::VerifyRequest()).ok());
  EXPECT_TRUE(admin->Verify(v1::VerifyRequest()).ok());
}

}  // namespace
}  // namespace jitd

namespace jitd {
namespace {

TEST_F(Bounded, OneClientMayStartTheWorkersAndHalfTheQueueNoMore) {
  // --workers 1 --max-queue 4: one client may have 1 + 2 new compiles
  // queued or running; the queue's other half stays for other clients.
  Start({"--workers", "1", "--max-queue", "4"});
  const std::vector<std::string> threads = {"128", "256", "512", "1024"};
  std::vector<absl::Status> answers(threads.size());
  std::latch start(static_cast<std::ptrdiff_t>(threads.size()));
  std::vector<std::thread> callers;
  for (size_t i = 0; i < threads.size(); ++i) {
    callers.emplace_back([&, i] {
      std::unique_ptr<Client> client = daemon_->Connect("", kCompileCallTimeout);
      start.arrive_and_wait();
      answers[i] = client->GetKernel(KernelRequest("small.block_sum", {{"threads", threads[i]}})).status();
    });
  }
  for (std::thread& caller : callers) caller.join();
  size_t refused = 0;
  for (const absl::Status& answer : answers) {
    if (answer.ok()) continue;
    ++refused;
    EXPECT_EQ(answer.code(), absl::StatusCode::kResourceExhausted) << answer;
    EXPECT_THAT(std::string(answer.message()),
                ::testing::ContainsRegex("uid:[0-9]+ has 3 new compiles queued or running, the most one client may "
                                         "start at once \\(3: the workers and half of --max-queue\\)"));
  }
  EXPECT_EQ(refused, 1u);
  const v1::StatsResponse stats = daemon_->Stats();
  EXPECT_EQ(stats.peer_compiles_refused(), 1u);
  EXPECT_EQ(stats.compile_failures(), 0u);
}

}  // namespace
}  // namespace jitd
