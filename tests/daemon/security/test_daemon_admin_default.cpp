// The admin credential a daemon has without --admin-token-file: a random
// token in SOCKET.admin-token (0600), which jitd clients of the daemon's
// user read by themselves; without it, state-changing admin calls are
// refused and reading ones are not.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <fstream>

#include "jitd/v1/cache_admin.grpc.pb.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using testing::TempDir;
using testing::TestDaemon;

std::filesystem::path TokenFile(const TestDaemon& daemon) { return daemon.socket_path().string() + ".admin-token"; }

std::string Read(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line;
}

TEST(AdminDefault, TheDaemonWritesARandomTokenOnlyItsUserMayRead) {
  TempDir dir;
  std::string first_token;
  {
    TestDaemon daemon(dir);
    ASSERT_TRUE(daemon.WaitUntilServing().ok());
    struct stat st {};
    ASSERT_EQ(stat(TokenFile(daemon).c_str(), &st), 0) << "no " << TokenFile(daemon);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    first_token = Read(TokenFile(daemon));
    EXPECT_THAT(first_token, MatchesRegex("[0-9a-f]{64}"));
    daemon.process().Signal(SIGTERM);
    ASSERT_EQ(daemon.process().WaitForExit(testing::kProcessTimeout), 0);
    EXPECT_FALSE(std::filesystem::exists(TokenFile(daemon))) << "the token outlived its daemon";
  }
  TestDaemon again(dir);
  ASSERT_TRUE(again.WaitUntilServing().ok());
  EXPECT_NE(Read(TokenFile(again)), first_token) << "a new start must make a new token";
}

TEST(AdminDefault, WithoutTheTokenEvictAndRepairAreRefusedAndReadingIsNot) {
  TempDir dir;
  TestDaemon daemon(dir);
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  ClientOptions options;
  options.endpoint = daemon.endpoint();
  options.read_socket_admin_token = false;  // as a user who cannot read the file
  absl::StatusOr<std::unique_ptr<Client>> outsider = Client::Connect(options);
  ASSERT_TRUE(outsider.ok());

  v1::EvictRequest evict;
  evict.set_kernel_glob("*");
  absl::Status refused = (*outsider)->Evict(evict).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
  // The real file, not a placeholder, and in a CLI user's words.
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("this daemon's token is in " + daemon.socket_path().string() + ".admin-token"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("jitctl --admin-token-file FILE"));
  // A dry run removes nothing: it needs no token.
  evict.set_dry_run(true);
  absl::StatusOr<v1::EvictResponse> dry = (*outsider)->Evict(evict);
  ASSERT_TRUE(dry.ok()) << dry.status();
  EXPECT_TRUE(dry->dry_run());
  evict.set_dry_run(false);
  v1::VerifyRequest repair;
  repair.set_repair(true);
  EXPECT_EQ((*outsider)->Verify(repair).status().code(), absl::StatusCode::kPermissionDenied);

  EXPECT_TRUE((*outsider)->Stats().ok());
  EXPECT_TRUE((*outsider)->ListEntries({}).ok());
  v1::VerifyRequest look;
  look.set_repair(false);
  EXPECT_TRUE((*outsider)->Verify(look).ok());

  // The daemon's own user: jitd::Client found the token by itself.
  EXPECT_TRUE(daemon.Connect()->Evict(evict).ok());
  // And so does jitctl.
  testing::ProcessResult jitctl = daemon.Jitctl({"evict", "--kernel", "*"});
  EXPECT_EQ(jitctl.exit_code, 0) << jitctl.output;
}

TEST(AdminDefault, AnAdminTokenFileReplacesTheGeneratedToken) {
  TempDir dir;
  std::ofstream(dir / "token") << "operator-secret\n";
  // A token file left by a killed daemon must not mislead clients.
  std::ofstream(dir / "jitd.sock.admin-token") << "stale\n";
  TestDaemon daemon(dir, {"--admin-token-file", (dir / "token").string()});
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  EXPECT_FALSE(std::filesystem::exists(TokenFile(daemon)));
  v1::EvictRequest evict;
  evict.set_kernel_glob("*");
  EXPECT_EQ(daemon.Connect()->Evict(evict).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(daemon.Connect("operator-secret")->Evict(evict).ok());
}

}  // namespace
}  // namespace jitd
