// TCP is TLS unless asked otherwise: a TCP address without a certificate is
// refused at start, plaintext needs --insecure-tcp (and is warned about),
// TLS serves clients that trust its CA, and with --tls-client-ca only
// clients with a certificate that CA signed. The certificates are made
// here with the openssl command (a CA, a server and a client certificate).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "test_daemon.h"

namespace jitd {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::RunProcess;
using testing::TempDir;
using testing::TestDaemon;

// Runs openssl (Debian's, which deploy/install-deps.sh installs) with
// `args`; fails the test on a non-zero exit.
void OpenSsl(const TempDir& dir, std::vector<std::string> args) {
  ASSERT_TRUE(fs::exists("/usr/bin/openssl")) << "no /usr/bin/openssl: run deploy/install-deps.sh";
  args.insert(args.begin(), "/usr/bin/openssl");
  const testing::ProcessResult r = RunProcess(args, dir / "openssl.log", std::chrono::seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

// DIR/ca.pem, DIR/server.{pem,key} (localhost, 127.0.0.1), DIR/client.{pem,key}.
void MakeCertificates(const TempDir& dir) {
  const std::string d = dir.path().string() + "/";
  const std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  OpenSsl(dir, with({"req", "-x509", "-days", "1", "-subj", "/CN=jitd test CA", "-keyout", d + "ca.key", "-out",
                     d + "ca.pem"},
                    ec));
  std::ofstream(dir / "server.ext") << "subjectAltName=DNS:localhost,IP:127.0.0.1\n";
  for (const char* who : {"server", "client"}) {
    const std::string w = d + who;
    OpenSsl(dir,
            with({"req", "-subj", std::string("/CN=jitd test ") + who, "-keyout", w + ".key", "-out", w + ".csr"}, ec));
    std::vector<std::string> sign = {
        "x509",   "-req",       "-days",           "1",    "-in",     w + ".csr", "-CA", d + "ca.pem",
        "-CAkey", d + "ca.key", "-CAcreateserial", "-out", w + ".pem"};
    if (std::string(who) == "server") sign.insert(sign.end(), {"-extfile", d + "server.ext"});
    OpenSsl(dir, sign);
  }
}

// The TCP port a daemon listening on 127.0.0.1:0 got, from its ready line.
int TcpPort(TestDaemon& daemon) {
  if (!daemon.WaitUntilLoggedReady().ok()) return 0;
  std::smatch match;
  const std::string output = daemon.process().Output();
  static const std::regex kReady("serving on [^\\n]*127\\.0\\.0\\.1:([0-9]+)");
  return std::regex_search(output, match, kReady) ? std::stoi(match[1]) : 0;
}

std::unique_ptr<Client> TcpClient(int port, const fs::path& ca, const fs::path& cert = {}, const fs::path& key = {}) {
  ClientOptions options;
  options.endpoint = "localhost:" + std::to_string(port);
  options.connect_timeout = std::chrono::milliseconds(0);
  options.call_timeout = std::chrono::seconds(10);
  options.tls_ca_file = ca;
  options.tls_cert_file = cert;
  options.tls_key_file = key;
  auto client = Client::Connect(options);
  return client.ok() ? *std::move(client) : nullptr;
}

TEST(Tls, ATcpAddressWithoutTlsIsRefusedUnlessPlaintextIsAskedFor) {
  TempDir dir;
  std::vector<std::string> args = TestDaemon::DefaultArgs(dir);
  args.insert(args.end(), {"--listen", "127.0.0.1:0"});
  const testing::ProcessResult refused = RunProcess(args, dir / "refused.log", testing::kProcessTimeout);
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("opens a TCP port: give --tls-cert and --tls-key"));
  EXPECT_THAT(refused.output, HasSubstr("--insecure-tcp"));
  // Refused before any side effect: no cache directory (nor workers in it).
  EXPECT_FALSE(fs::exists(dir / "cache")) << refused.output;

  TestDaemon daemon(dir, {"--listen", "127.0.0.1:0", "--insecure-tcp"});
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  EXPECT_THAT(daemon.process().Output(), HasSubstr("serving plaintext TCP"));
  const int port = TcpPort(daemon);
  ASSERT_GT(port, 0) << daemon.process().Output();
  ClientOptions options;
  options.endpoint = "127.0.0.1:" + std::to_string(port);
  auto plaintext = Client::Connect(options);
  ASSERT_TRUE(plaintext.ok()) << plaintext.status();
  EXPECT_TRUE((*plaintext)->Stats().ok());
}

TEST(Tls, AnAbstractUnixSocketIsRefusedNotServedAsTcp) {
  // It has no file mode (anyone on the host could connect), and was once
  // taken for HOST:PORT and served plaintext under --insecure-tcp.
  TempDir dir;
  std::vector<std::string> args = TestDaemon::DefaultArgs(dir);
  args.insert(args.end(), {"--listen", "unix-abstract:7070", "--insecure-tcp"});
  const testing::ProcessResult refused = RunProcess(args, dir / "refused.log", testing::kProcessTimeout);
  EXPECT_NE(refused.exit_code, 0) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("'unix-abstract:7070' uses the gRPC scheme unix-abstract"));
  EXPECT_THAT(refused.output, HasSubstr("use unix:PATH or HOST:PORT"));
  EXPECT_THAT(refused.output, ::testing::Not(HasSubstr("plaintext TCP")));
  EXPECT_FALSE(fs::exists(dir / "cache"));
}

TEST(Tls, TlsServesClientsThatTrustItsCaAndNoOthers) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(MakeCertificates(dir));
  TestDaemon daemon(dir, {"--listen", "127.0.0.1:0", "--tls-cert", (dir / "server.pem").string(), "--tls-key",
                          (dir / "server.key").string()});
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  const int port = TcpPort(daemon);
  ASSERT_GT(port, 0) << daemon.process().Output();

  std::unique_ptr<Client> trusting = TcpClient(port, dir / "ca.pem");
  ASSERT_NE(trusting, nullptr);
  absl::StatusOr<v1::StatsResponse> stats = trusting->Stats();
  EXPECT_TRUE(stats.ok()) << stats.status();

  ClientOptions plain;
  plain.endpoint = "localhost:" + std::to_string(port);
  plain.connect_timeout = std::chrono::milliseconds(0);
  plain.call_timeout = std::chrono::seconds(5);
  auto plaintext = Client::Connect(plain);
  ASSERT_TRUE(plaintext.ok());
  EXPECT_FALSE((*plaintext)->Stats().ok()) << "a plaintext client got through a TLS port";

  // jitctl speaks TLS too.
  const testing::ProcessResult jitctl =
      RunProcess({testing::JitctlBinary(), "--endpoint", "localhost:" + std::to_string(port), "--tls-ca",
                  (dir / "ca.pem").string(), "stats"},
                 dir / "jitctl.log", testing::kProcessTimeout);
  EXPECT_EQ(jitctl.exit_code, 0) << jitctl.output;
}

TEST(Tls, WithAClientCaOnlyClientsWithItsCertificatesGetIn) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(MakeCertificates(dir));
  TestDaemon daemon(dir, {"--listen", "127.0.0.1:0", "--tls-cert", (dir / "server.pem").string(), "--tls-key",
                          (dir / "server.key").string(), "--tls-client-ca", (dir / "ca.pem").string()});
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  const int port = TcpPort(daemon);
  ASSERT_GT(port, 0) << daemon.process().Output();

  std::unique_ptr<Client> anonymous = TcpClient(port, dir / "ca.pem");
  ASSERT_NE(anonymous, nullptr);
  EXPECT_FALSE(anonymous->Stats().ok()) << "a client without a certificate got in";

  std::unique_ptr<Client> known = TcpClient(port, dir / "ca.pem", dir / "client.pem", dir / "client.key");
  ASSERT_NE(known, nullptr);
  absl::StatusOr<v1::StatsResponse> stats = known->Stats();
  EXPECT_TRUE(stats.ok()) << stats.status();
}

TEST(Tls, ACertificateWithoutItsKeyIsAUsageError) {
  TempDir dir;
  std::ofstream(dir / "cert.pem") << "-----BEGIN CERTIFICATE-----\n";
  std::vector<std::string> args = TestDaemon::DefaultArgs(dir);
  args.insert(args.end(), {"--listen", "127.0.0.1:0", "--tls-cert", (dir / "cert.pem").string()});
  const testing::ProcessResult r = RunProcess(args, dir / "jitd.log", testing::kProcessTimeout);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("--tls-cert and --tls-key go together"));
}

}  // namespace
}  // namespace jitd
