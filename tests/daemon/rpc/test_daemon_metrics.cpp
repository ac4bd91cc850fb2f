// --metrics-listen: the daemon's Prometheus endpoint, scraped over a real
// socket while real requests run. Each counter a test names is checked
// against the requests the test made.
#include <gtest/gtest.h>

#include "kernel_fixtures.h"
#include "scrape.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using testing::HttpGet;
using testing::Sample;
using testing::TempDir;
using testing::TestDaemon;

std::vector<std::string> Args() {
  return {"--kernels", testing::SmallKernelsDir().string(), "--workers", "1", "--metrics-listen", "127.0.0.1:0"};
}

TEST(Metrics, RequestsCompilesAndTheCacheAreCountedAsTheyHappen) {
  TempDir dir;
  TestDaemon daemon(dir, Args());
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  auto port = testing::MetricsPort(daemon);
  ASSERT_TRUE(port.has_value()) << daemon.process().Output();

  auto client = daemon.Connect();
  ASSERT_TRUE(client->GetKernel(testing::KernelRequest("small.fill", {{"dtype", "fp32"}})).ok());  // compiled
  ASSERT_TRUE(client->GetKernel(testing::KernelRequest("small.fill", {{"dtype", "fp32"}})).ok());  // memory
  ASSERT_TRUE(client->GetKernel(testing::KernelRequest("small.fill", {{"dtype", "fp32"}})).ok());  // memory
  EXPECT_FALSE(client->GetKernel(testing::KernelRequest("small.nope")).ok());                      // not found
  EXPECT_FALSE(client->GetKernel(testing::KernelRequest("small.broken")).ok());                    // NVRTC error

  const std::string response = HttpGet(*port);
  ASSERT_EQ(response.rfind("HTTP/1.1 200", 0), 0u) << response.substr(0, 200);
  EXPECT_NE(response.find("Content-Type: text/plain; version=0.0.4"), std::string::npos);
  const std::string body = response.substr(response.find("\r\n\r\n") + 4);

  EXPECT_EQ(Sample(body, R"(jitd_requests_total{outcome="ok",source="compiled"})"), 1);
  EXPECT_EQ(Sample(body, R"(jitd_requests_total{outcome="ok",source="memory"})"), 2);
  EXPECT_EQ(Sample(body, R"(jitd_requests_total{outcome="not_found",source="none"})"), 1);
  EXPECT_EQ(Sample(body, R"(jitd_requests_total{outcome="failed_precondition",source="none"})"), 1);
  EXPECT_EQ(Sample(body, R"(jitd_request_duration_seconds_count{source="memory"})"), 2);
  EXPECT_EQ(Sample(body, R"(jitd_request_duration_seconds_bucket{source="memory",le="+Inf"})"), 2);
  EXPECT_EQ(Sample(body, R"(jitd_compiles_total{result="ok"})"), 1);
  EXPECT_EQ(Sample(body, R"(jitd_compiles_total{result="failed"})"), 1);
  EXPECT_EQ(Sample(body, "jitd_compile_duration_seconds_count"), 2);
  EXPECT_GT(Sample(body, "jitd_compile_duration_seconds_sum").value_or(0), 0.0);
  EXPECT_EQ(Sample(body, "jitd_cache_entries"), 1);
  EXPECT_GT(Sample(body, "jitd_cache_bytes").value_or(0), 0.0);
  EXPECT_EQ(Sample(body, "jitd_hot_cache_entries"), 1);
  EXPECT_EQ(Sample(body, "jitd_workers"), 1);
  EXPECT_EQ(Sample(body, "jitd_compile_queue_depth"), 0);
  EXPECT_EQ(Sample(body, "jitd_cache_corruptions_total"), 0);
  EXPECT_FALSE(Sample(body, "jitd_remote_circuit_open").has_value()) << "no remote tier, no remote metrics";
}

TEST(Metrics, OffUnlessAskedFor) {
  TempDir dir;
  TestDaemon daemon(dir, {"--kernels", testing::SmallKernelsDir().string()});
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  EXPECT_EQ(daemon.process().Output().find("metrics: serving"), std::string::npos);
}

TEST(Metrics, AnAddressInUseStopsTheStartWithAMessageNamingIt) {
  TempDir first_dir, second_dir;
  TestDaemon first(first_dir, Args());
  ASSERT_TRUE(first.WaitUntilServing().ok());
  auto port = testing::MetricsPort(first);
  ASSERT_TRUE(port.has_value());
  std::vector<std::string> args = TestDaemon::DefaultArgs(second_dir);
  args.insert(args.end(), {"--kernels", testing::SmallKernelsDir().string(), "--metrics-listen",
                           "127.0.0.1:" + std::to_string(*port)});
  auto result = testing::RunProcess(args, second_dir / "second.log", std::chrono::seconds(30));
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.output.find("--metrics-listen"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("127.0.0.1:" + std::to_string(*port)), std::string::npos) << result.output;
}

}  // namespace
}  // namespace jitd
