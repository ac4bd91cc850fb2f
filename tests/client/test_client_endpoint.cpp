// Client::Connect and the endpoint it is given (the grammar itself is
// jitd_base's: tests/base/test_base_endpoint.cpp).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "jitd/client.h"

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

}  // namespace
}  // namespace jitd
