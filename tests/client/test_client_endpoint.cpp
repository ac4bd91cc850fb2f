// Client::Connect and the endpoint it is given (the grammar itself is
// jitd_base's: tests/base/test_base_endpoint.cpp).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "jitd/client.h"
#include "src/grpc_status.h"

namespace jitd {
namespace {

TEST(ClientConnect, FailsAtOnceNamingTheEndpointWhenNoSocketExists) {
  ClientOptions options;
  options.endpoint = "unix:/nonexistent/dir/jitd.sock";
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(client.status().message().find("unix:/nonexistent/dir/jitd.sock"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(1));
}

TEST(ClientConnect, RejectsAMalformedEndpoint) {
  ClientOptions options;
  options.endpoint = "nowhere";
  EXPECT_EQ(Client::Connect(options).status().code(), absl::StatusCode::kInvalidArgument);
}

// gRPC's chain of transport errors is said as its last cause, and an
// UNAVAILABLE the daemon itself answered is not "cannot reach".
TEST(FromGrpcStatus, TransportErrorsAreTheirLastCauseAndTheDaemonsOwnStayItsOwn) {
  const absl::Status unix_socket = client_detail::FromGrpcStatus(
      grpc::Status(grpc::StatusCode::UNAVAILABLE,
                   "failed to connect to all addresses; last error: UNKNOWN: unix:/run/jitd.sock: No such file or "
                   "directory"),
      "unix:/run/jitd.sock");
  EXPECT_EQ(unix_socket.message(),
            "cannot reach jitd at unix:/run/jitd.sock: No such file or directory (is the daemon running? start it "
            "with `jitd`)");
  const absl::Status tcp = client_detail::FromGrpcStatus(
      grpc::Status(grpc::StatusCode::UNAVAILABLE,
                   "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Failed to connect to "
                   "remote host: Connection refused"),
      "127.0.0.1:1");
  EXPECT_EQ(tcp.message(),
            "cannot reach jitd at 127.0.0.1:1: Failed to connect to remote host: Connection refused (is the daemon "
            "running? start it with `jitd`)");
  const absl::Status daemon = client_detail::FromGrpcStatus(
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "toolkit changed while a.cu compiled; retry"), "unix:/s");
  EXPECT_EQ(daemon.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(daemon.message(), "jitd at unix:/s: toolkit changed while a.cu compiled; retry");
}

}  // namespace
}  // namespace jitd
