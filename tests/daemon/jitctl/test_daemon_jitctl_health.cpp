// `jitctl health`, the probe of deploy/ (systemd, the container's
// HEALTHCHECK, Kubernetes' exec probes): SERVING exits 0; a missing daemon, a
// dead one, a draining one and an unknown service exit non-zero saying why
// and naming the endpoint; --json is one document.
#include <gmock/gmock.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <iostream>
#include <thread>

#include "kernel_fixtures.h"
#include "poll_until.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using testing::kProcessTimeout;
using testing::ProcessResult;
using testing::RunProcess;
using testing::TempDir;
using testing::TestDaemon;

ProcessResult Health(const TempDir& dir, const std::string& endpoint, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = {testing::JitctlBinary(), "--endpoint", endpoint, "health"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return RunProcess(argv, dir / "health.log", kProcessTimeout);
}

TEST(JitctlHealth, ServingPrintsServingAndExitsZero) {
  TempDir dir;
  TestDaemon daemon(dir);
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  const ProcessResult health = daemon.Jitctl({"health"});
  EXPECT_EQ(health.exit_code, 0) << health.output;
  EXPECT_EQ(health.output, "SERVING\n");
}

TEST(JitctlHealth, EachServiceOfTheDaemonIsServing) {
  TempDir dir;
  TestDaemon daemon(dir);
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  for (const char* service : {"jitd.v1.Compiler", "jitd.v1.CacheAdmin"}) {
    const ProcessResult health = daemon.Jitctl({"health", "--service", service});
    EXPECT_EQ(health.exit_code, 0) << service << ": " << health.output;
    EXPECT_EQ(health.output, "SERVING\n") << service;
  }
}

TEST(JitctlHealth, JsonIsOneDocumentWithEndpointServiceAndStatus) {
  TempDir dir;
  TestDaemon daemon(dir);
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  const ProcessResult health = daemon.Jitctl({"--json", "health"});
  ASSERT_EQ(health.exit_code, 0) << health.output;
  google::protobuf::Value parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(health.output, &parsed).ok()) << health.output;
  const auto& fields = parsed.struct_value().fields();
  EXPECT_EQ(fields.at("status").string_value(), "SERVING");
  EXPECT_EQ(fields.at("endpoint").string_value(), daemon.endpoint());
  EXPECT_EQ(fields.at("service").string_value(), "");
}

TEST(JitctlHealth, AnUnknownServiceIsServiceUnknownAndExitsOne) {
  TempDir dir;
  TestDaemon daemon(dir);
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  const ProcessResult health = daemon.Jitctl({"health", "--service", "jitd.v1.NoSuchService"});
  EXPECT_EQ(health.exit_code, 1) << health.output;
  EXPECT_THAT(health.output, HasSubstr("SERVICE_UNKNOWN\n"));
  EXPECT_THAT(health.output, HasSubstr("jitd at " + daemon.endpoint() + " has no service 'jitd.v1.NoSuchService'"));
}

TEST(JitctlHealth, NoDaemonExitsOneNamingTheEndpointAtOnce) {
  TempDir dir;
  const std::string endpoint = "unix:" + (dir / "absent.sock").string();
  const ProcessResult health = Health(dir, endpoint);
  EXPECT_EQ(health.exit_code, 1) << health.output;
  EXPECT_THAT(health.output, HasSubstr("jitctl: health: UNAVAILABLE: cannot reach jitd at " + endpoint));
  EXPECT_THAT(health.output, ::testing::Not(HasSubstr("SERVING")));
  EXPECT_LT(health.elapsed, std::chrono::seconds(2));
}

TEST(JitctlHealth, NoDaemonIsAnErrorWithJsonToo) {
  TempDir dir;
  const std::string endpoint = "unix:" + (dir / "absent.sock").string();
  const ProcessResult health = RunProcess({testing::JitctlBinary(), "--json", "--endpoint", endpoint, "health"},
                                          dir / "health.log", kProcessTimeout);
  EXPECT_EQ(health.exit_code, 1) << health.output;
  EXPECT_THAT(health.output, HasSubstr("cannot reach jitd at " + endpoint));
}

TEST(JitctlHealth, AKilledDaemonsStaleSocketExitsOneNamingTheEndpoint) {
  TempDir dir;
  TestDaemon daemon(dir);
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  daemon.process().Signal(SIGKILL);  // leaves its socket file behind
  ASSERT_TRUE(daemon.process().WaitForExit(kProcessTimeout).has_value());
  ASSERT_TRUE(std::filesystem::exists(daemon.socket_path()));
  const ProcessResult health = Health(dir, daemon.endpoint());
  EXPECT_EQ(health.exit_code, 1) << health.output;
  EXPECT_THAT(health.output, HasSubstr("cannot reach jitd at " + daemon.endpoint()));
  EXPECT_LT(health.elapsed, std::chrono::seconds(4));
}

TEST(JitctlHealth, ATcpEndpointWithNobodyListeningExitsOneNamingIt) {
  TempDir dir;
  // Port 1 on loopback: nothing listens there, the connection is refused.
  const ProcessResult health = Health(dir, "127.0.0.1:1");
  EXPECT_EQ(health.exit_code, 1) << health.output;
  EXPECT_THAT(health.output, HasSubstr("cannot reach jitd at 127.0.0.1:1"));
}

TEST(JitctlHealth, WhileTheDaemonDrainsAfterSigtermItIsNotServing) {
  // One worker and four calls of the CUB kernel (about a second each): the
  // drain after SIGTERM lasts seconds, during which a probe must fail.
  TempDir dir;
  TestDaemon daemon(dir, {"--kernels", testing::SmallKernelsDir().string(), "--workers", "1"});
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  std::vector<std::thread> callers;
  for (const char* threads : {"128", "256", "512", "1024"}) {
    callers.emplace_back([&daemon, threads] {
      (void)daemon.Connect("", std::chrono::seconds(60))
          ->GetKernel(testing::KernelRequest("small.block_sum", {{"threads", threads}}));
    });
  }
  // All four in: a caller still connecting at SIGTERM is refused, and the
  // drain would be one compile short.
  ASSERT_TRUE(testing::PollUntil(
      [&] {
        const v1::StatsResponse stats = daemon.Stats();
        return stats.busy_workers() == 1 && stats.compiles_in_flight() == 4;
      },
      kProcessTimeout));
  daemon.process().Signal(SIGTERM);
  ASSERT_TRUE(testing::PollUntil(
      [&] { return daemon.process().Output().find("received SIGTERM; draining") != std::string::npos; },
      kProcessTimeout));
  const ProcessResult health = Health(dir, daemon.endpoint());
  const bool still_draining = !daemon.process().Exited();
  std::cout << "$ jitctl health  # while draining\n" << health.output;
  for (std::thread& caller : callers) caller.join();
  EXPECT_EQ(daemon.process().WaitForExit(kProcessTimeout), 0) << daemon.process().Output();
  EXPECT_TRUE(still_draining) << "the daemon finished draining before the probe ran; the test proves nothing";
  EXPECT_EQ(health.exit_code, 1) << health.output;
  // Health answers NOT_SERVING first; once gRPC stops taking calls the
  // socket refuses them. Either way the probe fails and says which daemon.
  EXPECT_THAT(health.output, AnyOf(HasSubstr("jitd at " + daemon.endpoint() + " answers NOT_SERVING"),
                                   HasSubstr("cannot reach jitd at " + daemon.endpoint())));
}

TEST(JitctlHealth, TimeoutMustBeADuration) {
  TempDir dir;
  const ProcessResult health = Health(dir, "unix:" + (dir / "absent.sock").string(), {"--timeout", "soon"});
  EXPECT_EQ(health.exit_code, 2) << health.output;
  EXPECT_THAT(health.output, HasSubstr("--timeout"));
}

TEST(JitctlHealth, TimeoutTakesMillisecondsForProbes) {
  TempDir dir;
  TestDaemon daemon(dir);
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  const ProcessResult health = daemon.Jitctl({"health", "--timeout", "500ms"});
  EXPECT_EQ(health.exit_code, 0) << health.output;
}

}  // namespace
}  // namespace jitd
