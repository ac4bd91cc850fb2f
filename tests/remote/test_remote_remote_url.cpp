// ParseRemoteUrl: every form remote.h documents, and the errors a person
// gets for the usual mistakes.
#include <gtest/gtest.h>

#include "remote/remote.h"

namespace jitd::cache {
namespace {

TEST(RemoteUrl, TcpWithDatabase) {
  auto url = ParseRemoteUrl("redis://cache.internal:6380/3");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->kind, RemoteUrl::Kind::kTcp);
  EXPECT_FALSE(url->tls);
  EXPECT_EQ(url->host, "cache.internal");
  EXPECT_EQ(url->port, 6380);
  EXPECT_EQ(url->db, 3);
  EXPECT_EQ(url->Redacted(), "redis://cache.internal:6380/3");
}

TEST(RemoteUrl, DatabaseDefaultsToZero) {
  auto url = ParseRemoteUrl("redis://127.0.0.1:6379");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->db, 0);
}

TEST(RemoteUrl, TlsSchemeAndBracketedIpv6) {
  auto url = ParseRemoteUrl("rediss://[::1]:6379/0");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_TRUE(url->tls);
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->Redacted(), "rediss://[::1]:6379/0");
}

TEST(RemoteUrl, PasswordIsParsedAndNeverShown) {
  auto url = ParseRemoteUrl("redis://jitd:s3cret@cache:6379/1");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->user, "jitd");
  EXPECT_EQ(url->password, "s3cret");
  EXPECT_EQ(url->Redacted().find("s3cret"), std::string::npos) << url->Redacted();
  auto bare = ParseRemoteUrl("redis://:pw@cache:6379");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->user, "");
  EXPECT_EQ(bare->password, "pw");
}

TEST(RemoteUrl, UnixSocketWithDatabase) {
  auto url = ParseRemoteUrl("unix:///run/redis/redis.sock?db=2");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->kind, RemoteUrl::Kind::kUnix);
  EXPECT_EQ(url->path, "/run/redis/redis.sock");
  EXPECT_EQ(url->db, 2);
}

TEST(RemoteUrl, MistakesAreNamed) {
  struct Case {
    const char* url;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {"http://cache:6379", "unknown scheme"},
           {"redis://cache", "HOST:PORT is required"},
           {"redis://cache:0", "port must be 1..65535"},
           {"redis://cache:99999", "port must be 1..65535"},
           {"redis://cache:6379/x", "database must be a number"},
           {"redis://:6379", "host is empty"},
           {"redis://[::1:6379", "unclosed"},
           {"unix://relative.sock", "must be absolute"},
           {"unix:///s.sock?database=1", "only query"},
       }) {
    auto url = ParseRemoteUrl(c.url);
    ASSERT_FALSE(url.ok()) << c.url;
    EXPECT_TRUE(absl::IsInvalidArgument(url.status())) << c.url;
    EXPECT_NE(std::string(url.status().message()).find(c.says), std::string::npos)
        << c.url << ": " << url.status().message();
  }
}

}  // namespace
}  // namespace jitd::cache
