// RedisBackend against a real redis-server: every operation, the ways to
// reach it (TCP, Unix socket, TLS, a password, a database) and the ways it
// fails (down, hung, full, wrong password, untrusted certificate), each
// with a bounded time and a status a person can act on.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "process.h"
#include "redis_server.h"
#include "remote/remote.h"
#include "temp_dir.h"

namespace jitd::cache {
namespace {

using testing::RedisServer;
using testing::TempDir;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::unique_ptr<RemoteBackend> Open(const std::string& text, RemoteOptions options = {}) {
  auto url = ParseRemoteUrl(text);
  EXPECT_TRUE(url.ok()) << url.status();
  auto backend = OpenRedisBackend(*url, options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return std::move(*backend);
}

class RedisBackendTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(testing::HaveRedisServer()) << "no redis-server: run deploy/install-deps.sh"; }
  TempDir dir_;
};

TEST_F(RedisBackendTest, SetThenGetManyReturnsValuesInOrderAndNulloptForMissingKeys) {
  RedisServer redis(dir_ / "redis");
  auto backend = Open(redis.url());
  std::string binary("\0\x01\xff value with NUL", 17);
  ASSERT_TRUE(backend->Set("a", binary, 0ms).ok());
  auto got = backend->GetMany({"missing", "a"});
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_FALSE((*got)[0].has_value());
  ASSERT_TRUE((*got)[1].has_value());
  EXPECT_EQ(*(*got)[1], binary);
}

TEST_F(RedisBackendTest, LargeValuesRoundTrip) {
  RedisServer redis(dir_ / "redis");
  auto backend = Open(redis.url());
  std::string big(16 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>(i / 4096);
  ASSERT_TRUE(backend->Set("big", big, 0ms).ok());
  auto got = backend->GetMany({"big"});
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE((*got)[0].has_value());
  EXPECT_TRUE(*(*got)[0] == big);
}

TEST_F(RedisBackendTest, SetWithTtlExpires) {
  RedisServer redis(dir_ / "redis");
  auto backend = Open(redis.url());
  ASSERT_TRUE(backend->Set("k", "v", 5000ms).ok());
  auto ttl = redis.Command({"PTTL", "k"});
  ASSERT_TRUE(ttl.ok());
  EXPECT_GT(ttl->integer, 0);
  EXPECT_LE(ttl->integer, 5000);
  ASSERT_TRUE(backend->Set("forever", "v", 0ms).ok());
  EXPECT_EQ(redis.Command({"PTTL", "forever"})->integer, -1);  // no expiry
}

TEST_F(RedisBackendTest, SetIfAbsentTakesAFreeKeyOnlyOnce) {
  RedisServer redis(dir_ / "redis");
  auto backend = Open(redis.url());
  auto first = backend->SetIfAbsent("lease", "me", 10000ms);
  auto second = backend->SetIfAbsent("lease", "you", 10000ms);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_TRUE(*first);
  EXPECT_FALSE(*second);
  EXPECT_EQ(redis.Command({"GET", "lease"})->str, "me");
}

TEST_F(RedisBackendTest, ExpireAndDeleteIfEqualsTouchOnlyTheHoldersValue) {
  RedisServer redis(dir_ / "redis");
  auto backend = Open(redis.url());
  // 10 s: the lease must outlive the checks below on a loaded machine.
  ASSERT_TRUE(*backend->SetIfAbsent("lease", "me", 10000ms));
  EXPECT_FALSE(*backend->ExpireIfEquals("lease", "you", 60000ms));
  EXPECT_LE(redis.Command({"PTTL", "lease"})->integer, 10000);
  EXPECT_TRUE(*backend->ExpireIfEquals("lease", "me", 60000ms));
  EXPECT_GT(redis.Command({"PTTL", "lease"})->integer, 10000);
  EXPECT_FALSE(*backend->DeleteIfEquals("lease", "you"));
  EXPECT_EQ(redis.Command({"EXISTS", "lease"})->integer, 1);
  EXPECT_TRUE(*backend->DeleteIfEquals("lease", "me"));
  EXPECT_EQ(redis.Command({"EXISTS", "lease"})->integer, 0);
  EXPECT_FALSE(*backend->ExpireIfEquals("lease", "me", 1000ms));  // gone: nothing to renew
}

TEST_F(RedisBackendTest, UnixSocketAndDatabaseSelection) {
  RedisServer redis(dir_ / "redis");
  auto backend = Open(redis.unix_url() + "?db=5");
  ASSERT_TRUE(backend->Set("in5", "v", 0ms).ok());
  EXPECT_EQ(redis.Command({"EXISTS", "in5"})->integer, 0);  // db 0
  auto tcp5 = Open("redis://127.0.0.1:" + std::to_string(redis.port()) + "/5");
  auto got = tcp5->GetMany({"in5"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].value_or(""), "v");
}

TEST_F(RedisBackendTest, PasswordIsSentAndAMissingOrWrongOneIsUnauthenticated) {
  RedisServer::Options options;
  options.password = "fleet-secret";
  RedisServer redis(dir_ / "redis", options);
  auto without = Open(redis.url())->GetMany({"k"});
  EXPECT_TRUE(absl::IsUnauthenticated(without.status())) << without.status();
  RemoteOptions wrong;
  wrong.password = "nope";
  auto refused = Open(redis.url(), wrong)->GetMany({"k"});
  EXPECT_TRUE(absl::IsUnauthenticated(refused.status())) << refused.status();
  EXPECT_EQ(std::string(refused.status().message()).find("nope"), std::string::npos) << "password in a message";
  RemoteOptions right;
  right.password = "fleet-secret";
  EXPECT_TRUE(Open(redis.url(), right)->GetMany({"k"}).ok());
  EXPECT_TRUE(Open("redis://:fleet-secret@127.0.0.1:" + std::to_string(redis.port()))->GetMany({"k"}).ok());
}

TEST_F(RedisBackendTest, AServerThatIsDownIsUnavailableAtOnce) {
  int port = 0;
  {
    RedisServer redis(dir_ / "redis");
    port = redis.port();
  }
  auto backend = Open("redis://127.0.0.1:" + std::to_string(port) + "/0");
  auto start = Clock::now();
  auto got = backend->GetMany({"k"});
  EXPECT_TRUE(absl::IsUnavailable(got.status())) << got.status();
  EXPECT_NE(std::string(got.status().message()).find("127.0.0.1:" + std::to_string(port)), std::string::npos);
  EXPECT_LT(Clock::now() - start, 500ms) << "a refused connection must not wait for a timeout";
}

TEST_F(RedisBackendTest, AHungServerCostsTheTimeoutAndNoMore) {
  RedisServer redis(dir_ / "redis");
  RemoteOptions options;
  options.io_timeout = 300ms;
  options.connect_timeout = 300ms;
  auto backend = Open(redis.url(), options);
  ASSERT_TRUE(backend->GetMany({"k"}).ok());  // a pooled connection, then the server stops answering
  redis.Pause();
  auto start = Clock::now();
  auto got = backend->GetMany({"k"});
  auto took = Clock::now() - start;
  redis.Resume();
  EXPECT_TRUE(absl::IsDeadlineExceeded(got.status())) << got.status();
  EXPECT_GE(took, 300ms);
  // The retry on a fresh connection is for dead connections, not slow
  // servers: one timeout, not two (plus slack for a loaded machine).
  EXPECT_LT(took, 1500ms);
  EXPECT_TRUE(backend->GetMany({"k"}).ok()) << "a resumed server is used again";
}

TEST_F(RedisBackendTest, AFullStoreIsResourceExhausted) {
  RedisServer redis(dir_ / "redis");
  ASSERT_TRUE(redis.Command({"CONFIG", "SET", "maxmemory", "1"}).ok());
  ASSERT_TRUE(redis.Command({"CONFIG", "SET", "maxmemory-policy", "noeviction"}).ok());
  auto backend = Open(redis.url());
  absl::Status set = backend->Set("k", std::string(4096, 'x'), 0ms);
  EXPECT_TRUE(absl::IsResourceExhausted(set)) << set;
  EXPECT_TRUE(backend->GetMany({"k"}).ok()) << "a full store still answers reads";
}

TEST_F(RedisBackendTest, PooledConnectionsSurviveARestartWithoutAFailedCall) {
  RedisServer redis(dir_ / "redis");
  auto backend = Open(redis.url());
  ASSERT_TRUE(backend->Set("k", "v", 0ms).ok());
  redis.Restart();  // same port; the pooled connection is dead
  auto got = backend->GetMany({"k"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE((*got)[0].has_value()) << "the restarted store is empty";
}

// DIR/ca.pem, DIR/server.{pem,key} for 127.0.0.1, DIR/other-ca.pem.
void MakeCertificates(const std::filesystem::path& d) {
  auto openssl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "/usr/bin/openssl");
    auto r = testing::RunProcess(args, d / "openssl.log", std::chrono::seconds(60));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  };
  const std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"};
  for (const char* ca : {"ca", "other-ca"}) {
    std::vector<std::string> a = {"req",     "-x509",
                                  "-days",   "1",
                                  "-subj",   "/CN=jitd test " + std::string(ca),
                                  "-keyout", (d / (std::string(ca) + ".key")).string(),
                                  "-out",    (d / (std::string(ca) + ".pem")).string()};
    a.insert(a.end(), ec.begin(), ec.end());
    openssl(a);
  }
  std::ofstream(d / "server.ext") << "subjectAltName=IP:127.0.0.1\n";
  std::vector<std::string> req = {"req",
                                  "-subj",
                                  "/CN=jitd test redis",
                                  "-keyout",
                                  (d / "server.key").string(),
                                  "-out",
                                  (d / "server.csr").string()};
  req.insert(req.end(), ec.begin(), ec.end());
  openssl(req);
  openssl({"x509", "-req", "-days", "1", "-in", (d / "server.csr").string(), "-CA", (d / "ca.pem").string(), "-CAkey",
           (d / "ca.key").string(), "-CAcreateserial", "-out", (d / "server.pem").string(), "-extfile",
           (d / "server.ext").string()});
  // redis-server runs as this user and reads the key.
  std::filesystem::permissions(d / "server.key",
                               std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

TEST_F(RedisBackendTest, TlsWithTheRightCaWorksAndAnUntrustedCertificateIsRefused) {
  std::filesystem::path certs = dir_ / "certs";
  std::filesystem::create_directories(certs);
  MakeCertificates(certs);
  RedisServer::Options options;
  options.tls_cert = certs / "server.pem";
  options.tls_key = certs / "server.key";
  options.tls_ca = certs / "ca.pem";
  RedisServer redis(dir_ / "redis", options);
  ASSERT_EQ(redis.url().rfind("rediss://", 0), 0u);

  RemoteOptions trusting;
  trusting.tls_ca = certs / "ca.pem";
  auto backend = Open(redis.url(), trusting);
  ASSERT_TRUE(backend->Set("over-tls", std::string(1 << 20, 'z'), 0ms).ok());
  auto got = backend->GetMany({"over-tls"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].value_or("").size(), size_t{1} << 20);

  RemoteOptions other;
  other.tls_ca = certs / "other-ca.pem";
  auto refused = Open(redis.url(), other)->GetMany({"over-tls"});
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();
  EXPECT_NE(std::string(refused.status().message()).find("not trusted"), std::string::npos) << refused.status();

  auto plain = Open("redis://127.0.0.1:" + std::to_string(redis.port()))->GetMany({"over-tls"});
  EXPECT_FALSE(plain.ok()) << "plaintext to a TLS port must fail, not hang";
}

TEST_F(RedisBackendTest, TlsFilesWithoutATlsUrlAreAUsageError) {
  auto url = ParseRemoteUrl("redis://127.0.0.1:6379");
  RemoteOptions options;
  options.tls_ca = "/etc/ssl/certs/ca-certificates.crt";
  auto backend = OpenRedisBackend(*url, options);
  EXPECT_TRUE(absl::IsInvalidArgument(backend.status()));
  EXPECT_NE(std::string(backend.status().message()).find("rediss://"), std::string::npos);
}

}  // namespace
}  // namespace jitd::cache
