// grpc.health.v1.Health as jitd serves it (daemon/rpc/health_rpc.cpp):
// Check for the server and each service, NOT_FOUND for others, and Watch
// streams that see the change to NOT_SERVING at shutdown and then end.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;
using testing::TempDir;
using testing::TestDaemon;

constexpr std::chrono::seconds kCallTimeout{10};

std::unique_ptr<Health::Stub> HealthStub(const TestDaemon& daemon) {
  return Health::NewStub(grpc::CreateChannel(daemon.endpoint(), grpc::InsecureChannelCredentials()));
}

grpc::Status Check(Health::Stub& stub, const std::string& service, HealthCheckResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
  HealthCheckRequest request;
  request.set_service(service);
  return stub.Check(&context, request, response);
}

TEST(Health, CheckAnswersServingForTheServerAndEachService) {
  TempDir dir;
  TestDaemon daemon(dir);
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  std::unique_ptr<Health::Stub> stub = HealthStub(daemon);
  for (const char* service : {"", "jitd.v1.Compiler", "jitd.v1.CacheAdmin"}) {
    HealthCheckResponse response;
    grpc::Status status = Check(*stub, service, &response);
    ASSERT_TRUE(status.ok()) << service << ": " << status.error_message();
    EXPECT_EQ(response.status(), HealthCheckResponse::SERVING) << service;
  }
}

TEST(Health, CheckOfAnUnknownServiceIsNotFound) {
  TempDir dir;
  TestDaemon daemon(dir);
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  HealthCheckResponse response;
  grpc::Status status = Check(*HealthStub(daemon), "jitd.v1.NoSuchService", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(status.error_message().find("jitd.v1.NoSuchService"), std::string::npos) << status.error_message();
}

TEST(Health, WatchSeesServingThenNotServingAtShutdownAndEnds) {
  TempDir dir;
  TestDaemon daemon(dir);
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  std::unique_ptr<Health::Stub> stub = HealthStub(daemon);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
  HealthCheckRequest request;
  std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> reader = stub->Watch(&context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);

  daemon.process().Signal(SIGTERM);
  ASSERT_TRUE(reader->Read(&response)) << "the stream ended without saying NOT_SERVING";
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(reader->Read(&response));  // and then it ends, holding nothing up
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(daemon.process().WaitForExit(kCallTimeout), 0) << daemon.process().Output();
}

TEST(Health, WatchOfAnUnknownServiceSaysServiceUnknown) {
  TempDir dir;
  TestDaemon daemon(dir);
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  std::unique_ptr<Health::Stub> stub = HealthStub(daemon);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
  HealthCheckRequest request;
  request.set_service("jitd.v1.NoSuchService");
  std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> reader = stub->Watch(&context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVICE_UNKNOWN);
  context.TryCancel();
}

}  // namespace
}  // namespace jitd
