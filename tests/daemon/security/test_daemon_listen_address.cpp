// Listen addresses: what --listen accepts and how each is handed to gRPC.
#include <gtest/gtest.h>

#include "security/listen_address.h"

namespace jitd::daemon {
namespace {

TEST(ListenAddress, UnixPathIsMadeAbsoluteForGrpc) {
  absl::StatusOr<ListenAddress> address = ParseListenAddress("unix:/run/jitd/jitd.sock");
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(address->kind, ListenAddress::Kind::kUnix);
  EXPECT_EQ(address->GrpcTarget(), "unix:/run/jitd/jitd.sock");

  absl::StatusOr<ListenAddress> relative = ParseListenAddress("unix:rel/jitd.sock");
  ASSERT_TRUE(relative.ok()) << relative.status();
  EXPECT_TRUE(relative->unix_path.is_absolute());
  EXPECT_EQ(relative->unix_path, std::filesystem::current_path() / "rel/jitd.sock");
}

TEST(ListenAddress, TcpKeepsHostAndPortIncludingPortZero) {
  for (const char* text : {"127.0.0.1:7070", "0.0.0.0:0", "[::1]:7070", "localhost:65535"}) {
    absl::StatusOr<ListenAddress> address = ParseListenAddress(text);
    ASSERT_TRUE(address.ok()) << text << ": " << address.status();
    EXPECT_EQ(address->kind, ListenAddress::Kind::kTcp);
    EXPECT_EQ(address->GrpcTarget(), text);
  }
}

TEST(ListenAddress, RejectsWhatIsNeitherUnixNorHostPort) {
  for (const char* text : {"", "unix:", "localhost", ":7070", "host:port", "host:65536", "/tmp/jitd.sock"}) {
    EXPECT_EQ(ParseListenAddress(text).status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

TEST(ListenAddress, RejectsGrpcSchemesThatAreNotHostPort) {
  for (const char* text : {"unix-abstract:7070", "unix-abstract:jitd", "vsock:3:7070", "dns:localhost:7070",
                           "ipv4:127.0.0.1:7070", "ipv6:[::1]:7070"}) {
    absl::StatusOr<ListenAddress> address = ParseListenAddress(text);
    EXPECT_EQ(address.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(address.status().message().find("use unix:PATH or HOST:PORT"), std::string::npos) << address.status();
  }
}

TEST(ListenAddress, RejectsUnixPathsLongerThanASocketAddressHolds) {
  const std::string long_path = "unix:/tmp/" + std::string(120, 'x') + ".sock";
  absl::StatusOr<ListenAddress> address = ParseListenAddress(long_path);
  EXPECT_EQ(address.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(address.status().message().find("longer than"), std::string::npos);
}

}  // namespace
}  // namespace jitd::daemon
