// Connection floods against the real daemon: bounds on the Unix sockets
// told to the refused client, a descriptor limit (prlimit) that never
// leaves the daemon deaf, and the listener probe that ends a daemon whose
// TCP listener stopped accepting, for its supervisor to restart.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "jitd/client.h"
#include "jitd/v1/compiler.grpc.pb.h"
#include "kernel_fixtures.h"
#include "poll_until.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using ::testing::HasSubstr;
using testing::KernelRequest;
using testing::TempDir;
using testing::TestDaemon;
using namespace std::chrono_literals;

// Raw connections that send nothing, as a flooding client holds them.
class Flood {
 public:
  ~Flood() { Release(); }
  // Opens `n` connections to a Unix socket; returns how many connected.
  size_t Unix(const std::filesystem::path& path, size_t n) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    return Open(n, AF_UNIX, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  }
  size_t Tcp(uint16_t port, size_t n) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return Open(n, AF_INET, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  }
  void Release() {
    for (int fd : fds_) close(fd);
    fds_.clear();
  }

 private:
  size_t Open(size_t n, int family, const sockaddr* addr, socklen_t len) {
    size_t connected = 0;
    for (size_t i = 0; i < n; ++i) {
      const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) break;
      if (connect(fd, addr, len) != 0) {
        close(fd);
        continue;
      }
      fds_.push_back(fd);
      ++connected;
    }
    return connected;
  }
  std::vector<int> fds_;
};

std::vector<std::string> Small(std::vector<std::string> extra) {
  std::vector<std::string> args = {"--kernels", testing::SmallKernelsDir().string(), "--workers", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Connections, AFloodOverTheBoundIsToldWhyAndAClientAlreadyConnectedIsServed) {
  TempDir dir;
  TestDaemon daemon(dir, Small({"--max-connections", "8", "--max-connections-per-peer", "8"}));
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  // The honest client connects first; its one connection is never touched.
  std::unique_ptr<Client> honest = daemon.Connect("", 30s);
  ASSERT_TRUE(honest->GetKernel(KernelRequest("small.fill", {{"dtype", "fp32"}})).ok());

  Flood flood;
  ASSERT_EQ(flood.Unix(daemon.socket_path(), 40), 40u);  // the kernel's backlog takes them all
  ASSERT_TRUE(testing::PollUntil(
      [&] { return daemon.process().Output().find("new connections are closed at once") != std::string::npos; }, 10s));
  // A new client is told which bound it met, not "is the daemon running?".
  const testing::ProcessResult refused = daemon.Jitctl({"stats"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.output, HasSubstr("the daemon refused the connection: jitd has 8 connections open, the most "
                                        "--max-connections allows"));
  for (int i = 0; i < 5; ++i) {
    auto answer = honest->GetKernel(KernelRequest("small.fill", {{"dtype", "fp32"}}));
    ASSERT_TRUE(answer.ok()) << answer.status();
  }
  flood.Release();
  // Once the flood has gone, new clients get in again.
  ASSERT_TRUE(testing::PollUntil([&] { return daemon.Jitctl({"health"}).exit_code == 0; }, 10s))
      << daemon.process().Output();
  EXPECT_THAT(daemon.process().Output(), HasSubstr("under --max-connections again: accepting"));
  EXPECT_EQ(Count(daemon.process().Output(), "new connections are closed at once"), 1u)
      << "one line per episode, not one per refused connection";
}

TEST(Connections, OneUserCannotHoldMoreThanItsShare) {
  TempDir dir;
  TestDaemon daemon(dir, Small({"--max-connections", "64", "--max-connections-per-peer", "4"}));
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  Flood flood;
  ASSERT_EQ(flood.Unix(daemon.socket_path(), 4), 4u);
  // The daemon notices a connection gRPC has closed at its next sweep (a
  // second): until then WaitUntilServing's probes may still count as this
  // user's, a flood connection refused in their place, and a probe let in
  // once they are swept. So a probe that gets in adds a connection, until
  // the share is full and the probes are refused, saying why (even when
  // the probe's first connection took the share's last place: below).
  const std::string why = "this user holds 4 connections to jitd, the most --max-connections-per-peer allows";
  testing::ProcessResult refused;
  ASSERT_TRUE(testing::PollUntil(
      [&] {
        refused = daemon.Jitctl({"health"});
        if (refused.exit_code == 0) flood.Unix(daemon.socket_path(), 1);
        return refused.exit_code != 0 && refused.output.find(why) != std::string::npos;
      },
      10s))
      << refused.output << daemon.process().Output();
  EXPECT_THAT(daemon.process().Output(), ::testing::ContainsRegex("uid [0-9]+ holds 4"));
  flood.Release();
  ASSERT_TRUE(testing::PollUntil([&] { return daemon.Jitctl({"health"}).exit_code == 0; }, 10s));
}

// jitctl opens two connections, the local path's and then gRPC's. With
// one place left in the share, the first gets in and the second is
// refused, which gRPC reports only as a transport error ("Broken pipe"):
// the client asks the daemon why, and says which bound it met.
TEST(Connections, AClientWhoseFirstConnectionTookTheLastPlaceIsToldWhy) {
  TempDir dir;
  TestDaemon daemon(dir, Small({"--max-connections", "64", "--max-connections-per-peer", "4"}));
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  Flood flood;
  ASSERT_EQ(flood.Unix(daemon.socket_path(), 3), 3u);
  const std::string why = "this user holds 4 connections to jitd, the most --max-connections-per-peer allows";
  // A probe gets in only while connections of WaitUntilServing's are still
  // counted in place of the flood's; one more fills the share then.
  testing::ProcessResult health;
  ASSERT_TRUE(testing::PollUntil(
      [&] {
        health = daemon.Jitctl({"health"});
        if (health.exit_code == 0) flood.Unix(daemon.socket_path(), 1);
        return health.exit_code != 0;
      },
      10s))
      << health.output << daemon.process().Output();
  EXPECT_THAT(health.output,
              HasSubstr("cannot reach jitd at " + daemon.endpoint() + ": the daemon refused the connection: " + why));
  const testing::ProcessResult stats = daemon.Jitctl({"stats"});
  EXPECT_NE(stats.exit_code, 0);
  EXPECT_THAT(stats.output, HasSubstr("the daemon refused the connection: " + why));
  EXPECT_THAT(stats.output, ::testing::Not(HasSubstr("is the daemon running")));
  // The C++ client's IsServing (its health check) is told the same: its
  // gRPC connection, made at the first call, is refused. (jitctl's closed
  // connections are swept within a second: one more fills the share then.)
  ClientOptions options;
  options.endpoint = daemon.endpoint();
  options.connect_timeout = 0ms;
  absl::Status serving;
  ASSERT_TRUE(testing::PollUntil(
      [&] {
        absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
        if (!client.ok()) return false;
        serving = (*client)->IsServing().status();
        if (serving.ok()) flood.Unix(daemon.socket_path(), 1);
        return !serving.ok();
      },
      10s))
      << serving;
  EXPECT_THAT(std::string(serving.message()), HasSubstr("the daemon refused the connection: " + why));
}

// The descriptor limit is lowered under the daemon (prlimit, no root
// needed), and the bound raised above it, so that the flood really runs it
// out of descriptors: gRPC's own listener never accepted again after that.
// Sanitized too, in a build without UBSan's vptr check, which needs a free
// descriptor to work (CMakeLists.txt says why).
TEST(DescriptorExhaustion, RunningOutOfDescriptorsNeverLeavesItDeaf) {
  TempDir dir;
  TestDaemon daemon(dir, Small({"--max-connections", "1000"}), {}, {"/usr/bin/prlimit", "--nofile=128:128", "--"});
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  Flood flood;
  EXPECT_GE(flood.Unix(daemon.socket_path(), 200), 128u);
  ASSERT_TRUE(testing::PollUntil(
      [&] { return daemon.process().Output().find("out of file descriptors") != std::string::npos; }, 10s))
      << daemon.process().Output();
  // At the limit descriptors still come and go (gRPC's own, the refused
  // connections'), so one attempt may race the refusal: its connection is
  // closed before it could read why (EPIPE on its preface), or it finds a
  // descriptor free. Asked again, a client is told which limit it met.
  testing::ProcessResult during;
  EXPECT_TRUE(testing::PollUntil(
      [&] {
        during = daemon.Jitctl({"health"});
        return during.output.find("out of file descriptors (limit 128)") != std::string::npos;
      },
      10s))
      << during.output;
  EXPECT_NE(during.exit_code, 0);
  flood.Release();
  ASSERT_TRUE(testing::PollUntil([&] { return daemon.Jitctl({"health"}).exit_code == 0; }, 10s))
      << daemon.process().Output();
  auto answer = daemon.Connect("", 30s)->GetKernel(KernelRequest("small.fill", {{"dtype", "fp64"}}));
  EXPECT_TRUE(answer.ok()) << answer.status();
  EXPECT_THAT(daemon.process().Output(), HasSubstr("file descriptors are available again"));
}

TEST(Connections, TheDefaultBoundKeepsAReserveBelowTheDescriptorLimit) {
  TempDir dir;
  TestDaemon daemon(dir, Small({}), {}, {"/usr/bin/prlimit", "--nofile=256:256", "--"});
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  EXPECT_THAT(daemon.process().Output(), HasSubstr("connections: at most 192 open, 96 per user (file descriptor "
                                                   "limit 256)"));
  Flood flood;
  flood.Unix(daemon.socket_path(), 400);
  ASSERT_TRUE(testing::PollUntil(
      [&] { return daemon.process().Output().find("new connections are closed at once") != std::string::npos; }, 10s));
  EXPECT_THAT(daemon.process().Output(), ::testing::Not(HasSubstr("out of file descriptors")))
      << "the bound is met before the limit";
  flood.Release();
  ASSERT_TRUE(testing::PollUntil([&] { return daemon.Jitctl({"health"}).exit_code == 0; }, 10s));
}

TEST(Connections, ATcpListenerThatStopsAcceptingEndsTheDaemonForItsSupervisor) {
  // gRPC's TCP listener stops accepting for good after one EMFILE; the
  // probe notices and the daemon exits 75 (EX_TEMPFAIL) for a restart.
  TempDir dir;
  TestDaemon daemon(dir, Small({"--listen", "127.0.0.1:0", "--insecure-tcp", "--listen-probe-interval", "1"}), {},
                    {"/usr/bin/prlimit", "--nofile=100:100", "--"});
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  std::smatch port;
  const std::string log = daemon.process().Output();
  ASSERT_TRUE(std::regex_search(log, port, std::regex("serving on .*127\\.0\\.0\\.1:([0-9]+)"))) << log;
  Flood flood;
  flood.Tcp(static_cast<uint16_t>(std::stoi(port[1])), 150);
  ASSERT_TRUE(
      testing::PollUntil([&] { return daemon.process().Output().find("Failed accept4") != std::string::npos; }, 10s))
      << daemon.process().Output();
  flood.Release();
  const std::optional<int> exit_code = daemon.process().WaitForExit(30s);
  ASSERT_TRUE(exit_code.has_value()) << daemon.process().Output();
  EXPECT_EQ(*exit_code, 75) << daemon.process().Output();
  EXPECT_THAT(daemon.process().Output(), HasSubstr("has stopped accepting connections"));
  EXPECT_THAT(daemon.process().Output(), HasSubstr("exiting with status 75 so that the supervisor restarts jitd"));
}

TEST(Connections, TheProbeLeavesAHealthyDaemonAlone) {
  TempDir dir;
  TestDaemon daemon(dir, Small({"--listen", "127.0.0.1:0", "--insecure-tcp", "--listen-probe-interval", "1"}));
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  // Several probes of both addresses: none fails, the daemon stays up.
  for (int i = 0; i < 4; ++i) {
    EXPECT_FALSE(daemon.process().WaitForExit(1s).has_value());
  }
  EXPECT_THAT(daemon.process().Output(), ::testing::Not(HasSubstr("listener probe")));
  EXPECT_EQ(daemon.Jitctl({"health"}).exit_code, 0);
}

// A Unix socket client's peer is its user: `jitctl get` run as another
// user (setpriv, so root only) is another peer. Each request is for an
// instantiation nobody asked for yet: each needs a compile of its own.
testing::ProcessResult GetAsAnotherUser(const TempDir& dir, const TestDaemon& daemon, int i) {
  const std::vector<std::vector<std::string>> instantiations = {
      {"small.fill", "-p", "dtype=fp64"}, {"small.scale", "-p", "clamp=on"}, {"small.scale", "-p", "clamp=off"}};
  std::vector<std::string> argv = {"/usr/bin/setpriv",      "--reuid=65534", "--regid=0",       "--clear-groups",
                                   testing::JitctlBinary(), "--endpoint",    daemon.endpoint(), "get"};
  argv.insert(argv.end(), instantiations.at(static_cast<size_t>(i)).begin(),
              instantiations.at(static_cast<size_t>(i)).end());
  return testing::RunProcess(argv, dir / ("other-user-" + std::to_string(i) + ".log"), 60s);
}

TEST(PeerShare, WarmFloodsFromOneUserCannotDenyAnotherUsersGetKernel) {
  if (geteuid() != 0 || !std::filesystem::exists("/usr/bin/setpriv")) {
    GTEST_SKIP() << "needs root and setpriv to run a client as another user";
  }
  TempDir dir;
  // The other user reaches the socket (mode 0660, group root: it runs with
  // group 0) through the test's directory.
  std::filesystem::permissions(dir.path(), std::filesystem::perms::others_exec | std::filesystem::perms::group_exec,
                               std::filesystem::perm_options::add);
  // One worker, a queue of 8: one user may start 1 + 4 compiles, and the
  // other 4 places of the queue stay for everyone else.
  TestDaemon daemon(dir, Small({"--max-queue", "8"}));
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();

  // Five Warm calls from this user, each of 10,000 instantiations of their
  // own (a -D macro each), 64 at a time: far more than the queue holds.
  std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(daemon.endpoint(), grpc::InsecureChannelCredentials());
  std::unique_ptr<v1::Compiler::Stub> stub = v1::Compiler::NewStub(channel);
  constexpr int kWarms = 5;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::atomic<int> warms_ended{0};
  std::vector<std::thread> warms;
  for (int w = 0; w < kWarms; ++w) contexts.push_back(std::make_unique<grpc::ClientContext>());
  for (int w = 0; w < kWarms; ++w) {
    warms.emplace_back([&, w] {
      v1::WarmRequest request;
      request.set_concurrency(64);
      for (int i = 0; i < 10'000; ++i) {
        v1::KernelSpec* spec = request.add_specs();
        spec->set_kernel("small.fill");
        (*spec->mutable_params())["dtype"] = "fp32";
        spec->add_options("-DW" + std::to_string(w) + "_" + std::to_string(i));
      }
      std::unique_ptr<grpc::ClientReader<v1::WarmProgress>> reader = stub->Warm(contexts[w].get(), request);
      v1::WarmProgress progress;
      while (reader->Read(&progress)) {
      }
      (void)reader->Finish();
      ++warms_ended;
    });
  }
  // The flood is on: this user's compiles wait in the queue.
  ASSERT_TRUE(testing::PollUntil([&] { return daemon.Stats().queue_depth() >= 4; }, 30s)) << daemon.process().Output();

  // Another user's requests get in, each of them, while the flood goes on.
  for (int i = 0; i < 3; ++i) {
    const testing::ProcessResult got = GetAsAnotherUser(dir, daemon, i);
    EXPECT_EQ(got.exit_code, 0) << got.output;
    // (Its origin may say memory: the blob's path, in this user's cache,
    // is unreadable to the other user, whose client asks again for bytes.)
    EXPECT_THAT(got.output, HasSubstr("cubin")) << got.output;
  }
  EXPECT_EQ(warms_ended.load(), 0) << "the flood ended before the other user asked: the test proves nothing";
  // The flooding user was held to its share: its Warm items waited for
  // room instead of filling the queue (and failing when it was full).
  const v1::StatsResponse stats = daemon.Stats();
  EXPECT_LE(stats.queue_depth(), 8u);
  EXPECT_EQ(stats.compile_errors(), 0u) << "no Warm item was refused by a full queue";
  for (auto& context : contexts) context->TryCancel();
  for (std::thread& warm : warms) warm.join();
}

}  // namespace
}  // namespace jitd
