// The local path against the real daemon: a fresh client's cached kernel
// answered without gRPC on the same socket, a miss asked over gRPC and
// counted once, the daemon learning of every local hit (its stats, its
// metrics, the disk's use record), the connection bound applying to local
// connections too, and the rule that matters most: under concurrent
// eviction and recompiles, the path never yields a cubin other than the
// one its key names.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "jitd/base/local_wire.h"
#include "jitd/client.h"
#include "kernel_fixtures.h"
#include "poll_until.h"
#include "process_cpu.h"
#include "scrape.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using testing::TestDaemon;
using namespace std::chrono_literals;
namespace wire = local_wire;

const KernelSpec kFill{.kernel = "small.fill", .params = {{"dtype", "fp32"}}, .arch = "sm_90"};

std::vector<std::string> Small(std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--kernels", testing::SmallKernelsDir().string(), "--workers", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::unique_ptr<Client> Fresh(const TestDaemon& daemon, std::optional<bool> local_path = std::nullopt) {
  ClientOptions options;
  options.endpoint = daemon.endpoint();
  options.local_path = local_path;
  auto client = Client::Connect(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

// A raw local-path connection: the preface sent and its echo read.
class RawLocal {
 public:
  explicit RawLocal(const std::filesystem::path& socket) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", socket.c_str());
    connected_ = connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0 &&
                 send(fd_, wire::kPreface.data(), wire::kPreface.size(), MSG_NOSIGNAL) ==
                     static_cast<ssize_t>(wire::kPreface.size()) &&
                 Receive(wire::kPreface.size()) == wire::kPreface;
  }
  ~RawLocal() { close(fd_); }
  bool connected() const { return connected_; }

  v1::LocalAnswer Ask(const v1::GetKernelRequest& request) {
    std::string frame;
    wire::AppendFrame(request.SerializeAsString(), &frame);
    EXPECT_EQ(send(fd_, frame.data(), frame.size(), MSG_NOSIGNAL), static_cast<ssize_t>(frame.size()));
    v1::LocalAnswer answer;
    const std::string header = Receive(wire::kHeaderBytes);
    if (header.size() == wire::kHeaderBytes) {
      EXPECT_TRUE(answer.ParseFromString(Receive(wire::FrameLength(header.data()))));
    }
    return answer;
  }

 private:
  std::string Receive(size_t n) {
    std::string got(n, '\0');
    size_t at = 0;
    while (at < n) {
      const ssize_t r = recv(fd_, got.data() + at, n - at, 0);
      if (r <= 0) break;
      at += static_cast<size_t>(r);
    }
    got.resize(at);
    return got;
  }
  int fd_ = -1;
  bool connected_ = false;
};

TEST(LocalPath, AFreshClientsCachedKernelComesOverTheLocalPathAndTheDaemonCountsIt) {
  TempDir dir;
  TestDaemon daemon(dir, Small({"--metrics-listen", "127.0.0.1:0"}));
  ASSERT_TRUE(daemon.WaitUntilServing().ok());

  // A miss: asked locally, then compiled over gRPC; one request in all.
  auto first = Fresh(daemon);
  auto compiled = first->GetKernelBinary(kFill);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ((*compiled)->source, v1::GetKernelResponse::COMPILED);
  EXPECT_EQ(first->counters().local_answers, 0u);
  EXPECT_EQ(first->counters().get_kernel_rpcs, 1u);

  // A new process's first request: a hit, and no gRPC call to get it.
  auto second = Fresh(daemon);
  auto hit = second->GetKernelBinary(kFill);
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_EQ((*hit)->source, v1::GetKernelResponse::MEMORY);
  EXPECT_EQ((*hit)->key, (*compiled)->key);
  EXPECT_EQ((*hit)->cubin, (*compiled)->cubin);
  EXPECT_EQ((*hit)->symbols, (*compiled)->symbols);
  EXPECT_THAT((*hit)->blob_path, HasSubstr(daemon.cache_dir().string() + "/blobs/"));
  EXPECT_EQ(second->counters().local_answers, 1u);
  EXPECT_EQ(second->counters().get_kernel_rpcs, 1u);

  // The daemon learnt of it as of any request: a request and a memory hit,
  // in its stats and its metrics; the local miss counted nowhere but in
  // jitd_local_requests_total.
  const v1::StatsResponse stats = daemon.Stats();
  EXPECT_EQ(stats.requests(), 2u);
  EXPECT_EQ(stats.memory_hits(), 1u);
  EXPECT_EQ(stats.compiles(), 1u);
  auto port = testing::MetricsPort(daemon);
  ASSERT_TRUE(port.has_value());
  const std::string body = testing::HttpGet(*port);
  EXPECT_EQ(testing::Sample(body, R"(jitd_local_requests_total{outcome="ok"})"), 1);
  EXPECT_EQ(testing::Sample(body, R"(jitd_local_requests_total{outcome="not_found"})"), 1);
  EXPECT_EQ(testing::Sample(body, R"(jitd_requests_total{outcome="ok",source="memory"})"), 1);
  EXPECT_EQ(testing::Sample(body, R"(jitd_requests_total{outcome="ok",source="compiled"})"), 1);
  EXPECT_FALSE(testing::Sample(body, R"(jitd_requests_total{outcome="not_found",source="none"})").has_value());
}

TEST(LocalPath, AHitOnDiskIsRecordedThereAsAUse) {
  TempDir dir;
  std::string key;
  {
    TestDaemon daemon(dir, Small());
    ASSERT_TRUE(daemon.WaitUntilServing().ok());
    auto compiled = Fresh(daemon)->GetKernelBinary(kFill);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    key = (*compiled)->key;
  }
  TestDaemon daemon(dir, Small());  // the same cache, nothing in memory
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  auto client = Fresh(daemon);
  auto hit = client->GetKernelBinary(kFill);
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_EQ((*hit)->source, v1::GetKernelResponse::DISK);
  EXPECT_EQ(client->counters().local_answers, 1u);
  EXPECT_EQ(daemon.Stats().disk_hits(), 1u);
  v1::ListEntriesRequest list;
  auto entries = client->ListEntries(list);
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->entries_size(), 1);
  EXPECT_EQ(entries->entries(0).key(), key);
  EXPECT_EQ(entries->entries(0).hits(), 1u) << "the local hit is recorded on disk";
}

// A hit is read once: the disk hit the daemon reads for an answer travels
// as bytes even when PATH is asked (the client does not read and verify
// the file again); a memory hit, which nobody read now, names its file.
TEST(LocalPath, ADiskHitAskedByPathComesAsTheBytesTheDaemonRead) {
  TempDir dir;
  {
    TestDaemon daemon(dir, Small());
    ASSERT_TRUE(daemon.WaitUntilServing().ok());
    ASSERT_TRUE(Fresh(daemon)->GetKernelBinary(kFill).ok());
  }
  TestDaemon daemon(dir, Small());  // the same cache, nothing in memory
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  RawLocal raw(daemon.socket_path());
  ASSERT_TRUE(raw.connected());
  v1::GetKernelRequest lookup = testing::KernelRequest("small.fill", {{"dtype", "fp32"}});
  lookup.set_mode(v1::GetKernelRequest::CACHED_ONLY);
  lookup.set_delivery(v1::GetKernelRequest::PATH);
  const v1::LocalAnswer from_disk = raw.Ask(lookup);
  ASSERT_EQ(from_disk.code(), 0) << from_disk.message();
  EXPECT_EQ(from_disk.response().source(), v1::GetKernelResponse::DISK);
  EXPECT_TRUE(from_disk.response().blob_path().empty());
  EXPECT_FALSE(from_disk.response().cubin().empty());
  EXPECT_EQ(from_disk.response().cubin_size(), from_disk.response().cubin().size());

  const v1::LocalAnswer from_memory = raw.Ask(lookup);
  ASSERT_EQ(from_memory.code(), 0) << from_memory.message();
  EXPECT_EQ(from_memory.response().source(), v1::GetKernelResponse::MEMORY);
  EXPECT_THAT(from_memory.response().blob_path(), HasSubstr(daemon.cache_dir().string() + "/blobs/"));
  EXPECT_TRUE(from_memory.response().cubin().empty());
  EXPECT_EQ(from_memory.response().cubin_size(), from_disk.response().cubin().size());
}

TEST(LocalPath, TurnedOffEveryRequestGoesOverGrpc) {
  TempDir dir;
  TestDaemon daemon(dir, Small());
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  ASSERT_TRUE(Fresh(daemon)->GetKernelBinary(kFill).ok());
  auto client = Fresh(daemon, /*local_path=*/false);
  auto hit = client->GetKernelBinary(kFill);
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_EQ((*hit)->source, v1::GetKernelResponse::MEMORY);
  EXPECT_EQ(client->counters().local_answers, 0u);
  EXPECT_EQ(client->counters().get_kernel_rpcs, 1u);
}

TEST(LocalPath, WithoutItTheDaemonServesGrpcOnlyAndClientsNeverNotice) {
  // Also what a client meets at a daemon that predates the local path: its
  // preface goes to gRPC, which refuses it, and the client uses gRPC.
  TempDir dir;
  TestDaemon daemon(dir, Small({"--no-local-path"}));
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  EXPECT_THAT(daemon.process().Output(), HasSubstr("local path: off (--no-local-path)"));
  EXPECT_FALSE(RawLocal(daemon.socket_path()).connected());
  ASSERT_TRUE(Fresh(daemon)->GetKernelBinary(kFill).ok());
  auto client = Fresh(daemon);
  ASSERT_NE(client, nullptr);
  auto hit = client->GetKernelBinary(kFill);
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_EQ((*hit)->source, v1::GetKernelResponse::MEMORY);
  EXPECT_EQ(client->counters().local_answers, 0u);
  EXPECT_EQ(client->counters().get_kernel_rpcs, 1u);
}

TEST(LocalPath, ItAnswersCachedOnlyLookupsAndSaysWhereTheRestGo) {
  TempDir dir;
  TestDaemon daemon(dir, Small());
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  RawLocal raw(daemon.socket_path());
  ASSERT_TRUE(raw.connected());

  v1::GetKernelRequest compile = testing::KernelRequest("small.fill", {{"dtype", "fp32"}});
  v1::LocalAnswer refused = raw.Ask(compile);
  EXPECT_EQ(refused.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(refused.message(), HasSubstr("CACHED_ONLY requests only; ask for a compile over gRPC"));

  v1::GetKernelRequest lookup = compile;
  lookup.set_mode(v1::GetKernelRequest::CACHED_ONLY);
  v1::LocalAnswer miss = raw.Ask(lookup);
  EXPECT_EQ(miss.code(), static_cast<int>(absl::StatusCode::kNotFound));
  EXPECT_THAT(miss.message(), HasSubstr("ask over gRPC"));
  EXPECT_EQ(daemon.Stats().compiles(), 0u) << "a local lookup never compiles";

  // gRPC on the same socket, then the same lookup hits on the same connection.
  auto client = daemon.Connect();
  ASSERT_TRUE(client->GetKernel(compile).ok());
  lookup.set_delivery(v1::GetKernelRequest::BYTES);
  v1::LocalAnswer hit = raw.Ask(lookup);
  EXPECT_EQ(hit.code(), 0) << hit.message();
  EXPECT_EQ(hit.response().source(), v1::GetKernelResponse::MEMORY);
  EXPECT_FALSE(hit.response().cubin().empty());
  EXPECT_EQ(hit.response().cubin_size(), hit.response().cubin().size());
}

// The acceptor answers a whole preface itself and leaves what follows it
// to the local server; a preface that comes in pieces is the local
// server's to finish. Either way the client sees the same bytes.
TEST(LocalPath, APrefaceWithARequestBehindItOrInPiecesIsAnsweredTheSame) {
  TempDir dir;
  TestDaemon daemon(dir, Small());
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  v1::GetKernelRequest lookup = testing::KernelRequest("small.fill", {{"dtype", "fp32"}});
  lookup.set_mode(v1::GetKernelRequest::CACHED_ONLY);
  std::string frame;
  wire::AppendFrame(lookup.SerializeAsString(), &frame);
  const auto open = [&] {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", daemon.socket_path().c_str());
    EXPECT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
    return fd;
  };
  const auto send_all = [](int fd, std::string_view bytes) {
    EXPECT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  };
  const auto receive = [](int fd, size_t n) {
    std::string got(n, '\0');
    size_t at = 0;
    while (at < n) {
      const ssize_t r = recv(fd, got.data() + at, n - at, 0);
      if (r <= 0) break;
      at += static_cast<size_t>(r);
    }
    got.resize(at);
    return got;
  };
  // The daemon's preface, then a NOT_FOUND answer (nothing is cached).
  const auto check = [&](int fd) {
    EXPECT_EQ(receive(fd, wire::kPreface.size()), wire::kPreface);
    const std::string header = receive(fd, wire::kHeaderBytes);
    ASSERT_EQ(header.size(), wire::kHeaderBytes);
    v1::LocalAnswer answer;
    ASSERT_TRUE(answer.ParseFromString(receive(fd, wire::FrameLength(header.data()))));
    EXPECT_EQ(answer.code(), static_cast<int>(absl::StatusCode::kNotFound)) << answer.message();
  };

  // In one send: the acceptor must read the preface and nothing more.
  const int together = open();
  send_all(together, std::string(wire::kPreface) + frame);
  check(together);
  close(together);

  // In pieces, the acceptor seeing only the start of the preface; four
  // bytes of it are as long as a frame header, and are none.
  for (const size_t cut : {3, 4, 5}) {
    SCOPED_TRACE(::testing::Message() << "the preface split after " << cut << " bytes");
    const int pieces = open();
    send_all(pieces, wire::kPreface.substr(0, cut));
    std::this_thread::sleep_for(100ms);  // the acceptor hands the connection over meanwhile
    send_all(pieces, std::string(wire::kPreface.substr(cut)) + frame);
    check(pieces);
    close(pieces);
  }
}

// The CPU time process `pid` has used so far (utime + stime of its
// /proc stat), in seconds.
double CpuSeconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  // Fields after the command's closing parenthesis: the state is field 3,
  // utime and stime are fields 14 and 15.
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  std::string field;
  uint64_t ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i >= 14) ticks += std::stoull(field);
  }
  return static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

TEST(LocalPath, PrefacesCutShortOrLeftUnfinishedCostTheDaemonNoCpu) {
  TempDir dir;
  TestDaemon daemon(dir, Small());
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  const pid_t pid = daemon.process().pid();
  const auto open = [&] {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", daemon.socket_path().c_str());
    EXPECT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
    return fd;
  };
  const double before = CpuSeconds(pid);
  const auto started = std::chrono::steady_clock::now();
  // Four bytes of the preface, left open (within the 5 s a preface may
  // take), and five then a hang-up, again and again for 2 s. Either kept
  // a core busy while its connection lasted (about 2 CPU-s here).
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(open());
    EXPECT_EQ(send(held.back(), wire::kPreface.data(), 4, MSG_NOSIGNAL), 4);
  }
  int cut_short = 0;
  while (std::chrono::steady_clock::now() - started < 2s) {
    const int fd = open();
    EXPECT_EQ(send(fd, wire::kPreface.data(), 5, MSG_NOSIGNAL), 5);
    close(fd);
    ++cut_short;
    std::this_thread::sleep_for(100ms);
  }
  const double used = CpuSeconds(pid) - before;
  // Generous, for a loaded machine: what a spin costs is ten times more.
  EXPECT_LT(used, 0.3) << "the daemon used " << used << " CPU-s in 2 s on " << held.size()
                       << " unfinished prefaces and " << cut_short << " cut short";
  // The held ones are still served: the rest of the preface and a request.
  v1::GetKernelRequest lookup = testing::KernelRequest("small.fill", {{"dtype", "fp32"}});
  lookup.set_mode(v1::GetKernelRequest::CACHED_ONLY);
  std::string rest(wire::kPreface.substr(4));
  wire::AppendFrame(lookup.SerializeAsString(), &rest);
  for (const int fd : held) {
    EXPECT_EQ(send(fd, rest.data(), rest.size(), MSG_NOSIGNAL), static_cast<ssize_t>(rest.size()));
    std::string preface(wire::kPreface.size(), '\0');
    EXPECT_EQ(recv(fd, preface.data(), preface.size(), MSG_WAITALL), static_cast<ssize_t>(preface.size()));
    EXPECT_EQ(preface, wire::kPreface);
    close(fd);
  }
  EXPECT_FALSE(daemon.process().Exited());
}

TEST(LocalPath, LocalConnectionsCountAgainstTheConnectionBound) {
  TempDir dir;
  TestDaemon daemon(dir, Small({"--max-connections", "3", "--max-connections-per-peer", "3"}));
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  // Local connections up to the bound. The harness's own health check
  // holds one of the three until the daemon has seen it close, so a
  // refusal before the third is retried until that happens.
  std::vector<std::unique_ptr<RawLocal>> held;
  ASSERT_TRUE(testing::PollUntil(
      [&] {
        while (held.size() < 3) {
          auto raw = std::make_unique<RawLocal>(daemon.socket_path());
          if (!raw->connected()) return false;
          held.push_back(std::move(raw));
        }
        return true;
      },
      10s))
      << held.size() << " local connections let in, not 3";
  // The first one beyond the bound is refused.
  EXPECT_FALSE(RawLocal(daemon.socket_path()).connected()) << "a fourth connection was let in";
  // A client beyond the bound is told so: by Connect(), which waits for
  // the daemon's preface, ...
  ClientOptions options;
  options.endpoint = daemon.endpoint();
  auto told = Client::Connect(options);
  ASSERT_FALSE(told.ok());
  EXPECT_TRUE(absl::IsUnavailable(told.status())) << told.status();
  EXPECT_THAT(std::string(told.status().message()), HasSubstr("the daemon refused the connection: "));
  EXPECT_THAT(std::string(told.status().message()), HasSubstr("--max-connections"));
  // ... or, connected without waiting, by its first request, over the
  // local path or gRPC.
  options.connect_timeout = 0ms;
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  auto refused = (*client)->GetKernelBinary(kFill);
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--max-connections"));
  // Once one lets go (and the daemon has seen it go), a client is served.
  held.pop_back();
  EXPECT_TRUE(testing::PollUntil(
      [&] {
        ClientOptions again;
        again.endpoint = daemon.endpoint();
        return Client::Connect(again).ok();  // the daemon's preface came back
      },
      10s));
}

TEST(LocalPath, UnderConcurrentEvictionItNeverServesAWrongOrTornCubin) {
  TempDir dir;
  TestDaemon daemon(dir, Small());
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  auto reference = Fresh(daemon)->GetKernelBinary(kFill);
  ASSERT_TRUE(reference.ok()) << reference.status();
  const std::string key = (*reference)->key;
  const std::string cubin = (*reference)->cubin;

  // One thread evicts the entry (memory and disk) and compiles it again,
  // over and over; others ask for it from fresh clients meanwhile.
  std::atomic<bool> stop{false};
  std::atomic<int> evictions{0};
  std::thread churn([&] {
    auto admin = Fresh(daemon, /*local_path=*/false);
    v1::EvictRequest evict;
    evict.add_keys(key);
    evict.set_include_pinned(true);
    while (!stop) {
      if (admin->Evict(evict).ok()) ++evictions;
      (void)admin->GetKernel(testing::KernelRequest("small.fill", {{"dtype", "fp32"}}));
    }
  });
  std::atomic<int> local{0}, served{0}, wrong{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      for (int i = 0; i < 40; ++i) {
        auto client = Fresh(daemon);
        if (client == nullptr) continue;
        auto answer = client->GetKernelBinary(kFill);
        if (!answer.ok()) {
          ADD_FAILURE() << answer.status();
          continue;
        }
        ++served;
        local += static_cast<int>(client->counters().local_answers);
        if ((*answer)->key != key || (*answer)->cubin != cubin) ++wrong;
      }
    });
  }
  for (auto& r : readers) r.join();
  stop = true;
  churn.join();
  EXPECT_EQ(served, 120);
  EXPECT_EQ(wrong, 0);
  EXPECT_GT(evictions, 0);
  EXPECT_GT(local, 0) << "some answers came over the local path";
  std::cout << "served " << served << " (" << local << " over the local path) across " << evictions << " evictions\n";
}

TEST(LocalPath, AClientWaitingOnASlowDaemonSpinsOnlyBrieflyThenSleeps) {
  // A stand-in for a daemon that takes 250 ms to answer the preface.
  TempDir dir;
  const std::string path = (dir.path() / "slow.sock").string();
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  ASSERT_EQ(bind(listener, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
  ASSERT_EQ(listen(listener, 4), 0);
  std::thread slow([listener] {
    const int fd = accept(listener, nullptr, nullptr);
    std::string preface(wire::kPreface.size(), '\0');
    size_t at = 0;
    while (at < preface.size()) {
      const ssize_t r = recv(fd, preface.data() + at, preface.size() - at, 0);
      if (r <= 0) break;
      at += static_cast<size_t>(r);
    }
    std::this_thread::sleep_for(250ms);
    (void)send(fd, wire::kPreface.data(), wire::kPreface.size(), MSG_NOSIGNAL);
    char c;
    while (recv(fd, &c, 1, 0) > 0) {
    }
    close(fd);
  });
  ClientOptions options;
  options.endpoint = "unix:" + path;
  const double before = testing::ProcessCpuMs();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  const double used = testing::ProcessCpuMs() - before;
  EXPECT_TRUE(client.ok()) << client.status();
  // The client spins a fraction of a millisecond for an answer, then
  // sleeps until it comes; spinning on, it would take about 250 ms.
  EXPECT_LT(used, 60.0) << "the client polls while the daemon is slow";
  client = absl::UnavailableError("closed");
  slow.join();
  close(listener);
}

}  // namespace
}  // namespace jitd
