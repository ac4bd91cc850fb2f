// jitd as a process: start-up checks, configuration, sockets, shutdown.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "test_daemon.h"

namespace jitd {
namespace {

using ::testing::HasSubstr;
using testing::kProcessTimeout;
using testing::RunProcess;
using testing::TempDir;
using testing::TestDaemon;

// Draining an idle daemon takes milliseconds; this bounds a hang.
constexpr std::chrono::seconds kExitTimeout{10};

TEST(Lifecycle, SigtermDrainsExitsZeroAndRemovesTheSocket) {
  TempDir dir;
  TestDaemon daemon(dir);
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  daemon.process().Signal(SIGTERM);
  EXPECT_EQ(daemon.process().WaitForExit(kExitTimeout), 0) << daemon.process().Output();
  EXPECT_FALSE(std::filesystem::exists(daemon.socket_path()));
  EXPECT_THAT(daemon.process().Output(), HasSubstr("jitd stopped"));
}

TEST(Lifecycle, SigintExitsZeroToo) {
  TempDir dir;
  TestDaemon daemon(dir);
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  daemon.process().Signal(SIGINT);
  EXPECT_EQ(daemon.process().WaitForExit(kExitTimeout), 0) << daemon.process().Output();
}

TEST(Lifecycle, LogsOneStartLineAndOneReadyLine) {
  TempDir dir;
  TestDaemon daemon(dir, {"--max-cache-bytes", "512M"});
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  const std::string log = daemon.process().Output();
  EXPECT_THAT(log, HasSubstr("jitd " JITD_VERSION " starting"));
  EXPECT_THAT(log, HasSubstr(daemon.endpoint()));
  EXPECT_THAT(log, HasSubstr((dir / "cache").string()));
  EXPECT_THAT(log, HasSubstr("0.5 GiB"));
  EXPECT_THAT(log, HasSubstr("jitd ready"));
}

TEST(Lifecycle, SocketIsGroupAccessibleOnlyMode0660) {
  TempDir dir;
  TestDaemon daemon(dir);
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  struct stat info {};
  ASSERT_EQ(stat(daemon.socket_path().c_str(), &info), 0);
  EXPECT_TRUE(S_ISSOCK(info.st_mode));
  EXPECT_EQ(info.st_mode & 0777, 0660u);
}

TEST(Lifecycle, StaleSocketFileIsReplacedAndServed) {
  TempDir dir;
  // A socket file nobody listens on, as a killed daemon leaves behind.
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, (dir / "jitd.sock").c_str(), sizeof(address.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  close(fd);

  TestDaemon daemon(dir);
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  EXPECT_THAT(daemon.process().Output(), HasSubstr("removed the stale socket"));
  EXPECT_TRUE(daemon.Connect()->Stats().ok());
}

TEST(Lifecycle, SecondDaemonOnALiveSocketRefusesAndTheFirstKeepsServing) {
  TempDir dir;
  TestDaemon first(dir);
  ASSERT_TRUE(first.WaitUntilServing().ok());

  std::vector<std::string> args = TestDaemon::DefaultArgs(dir);
  args.back() = (dir / "other-cache").string();  // same socket, another cache
  const auto second = RunProcess(args, dir / "second.log", kProcessTimeout);
  EXPECT_EQ(second.exit_code, 1) << second.output;
  EXPECT_THAT(second.output, HasSubstr("already serving on " + first.endpoint()));

  EXPECT_TRUE(std::filesystem::exists(first.socket_path()));
  absl::StatusOr<bool> serving = first.Connect()->IsServing();
  ASSERT_TRUE(serving.ok()) << serving.status();
  EXPECT_TRUE(*serving);
}

TEST(Lifecycle, DefaultListenIsTheSocketInXdgRuntimeDir) {
  TempDir dir;
  testing::Process daemon({testing::JitdBinary(), "--cache-dir", (dir / "cache").string()}, dir / "jitd.log",
                          {{"XDG_RUNTIME_DIR", dir.path().string()}});
  ClientOptions options;
  options.endpoint = "unix:" + (dir / "jitd.sock").string();
  options.connect_timeout = std::chrono::milliseconds(0);
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok());
  EXPECT_TRUE((*client)->WaitUntilServing(kProcessTimeout).ok()) << daemon.Output();
  EXPECT_THAT(daemon.Output(), HasSubstr("serving on unix:" + (dir / "jitd.sock").string()));
}

TEST(Lifecycle, ConfigFileSettingsApplyAndFlagsOverrideThem) {
  TempDir dir;
  std::ofstream(dir / "jitd.toml") << "listen = \"unix:jitd.sock\"\n"  // relative to the file
                                   << "cache_dir = \"from-file\"\n"
                                   << "max_cache_bytes = \"64M\"\n";
  testing::Process daemon(
      {testing::JitdBinary(), "--config", (dir / "jitd.toml").string(), "--cache-dir", (dir / "from-flag").string()},
      dir / "jitd.log");
  ClientOptions options;
  options.endpoint = "unix:" + (dir / "jitd.sock").string();
  options.connect_timeout = std::chrono::milliseconds(0);
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->WaitUntilServing(kProcessTimeout).ok()) << daemon.Output();
  absl::StatusOr<v1::StatsResponse> stats = (*client)->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->cache_dir(), (dir / "from-flag").string());
  EXPECT_EQ(stats->max_bytes(), uint64_t{64} << 20);
}

TEST(Lifecycle, BadConfigFileExitsNonZeroNamingTheFileAndTheKey) {
  TempDir dir;
  struct Case {
    const char* text;
    const char* expected;
  };
  for (const Case& c : {Case{"workers = 4\nlisten_on = \"unix:x\"\n", ":2: unknown key 'listen_on'"},
                        Case{"workers = \"four\"\n", ":1: key 'workers': must be an integer"}}) {
    std::ofstream(dir / "bad.toml") << c.text;
    std::vector<std::string> args = TestDaemon::DefaultArgs(dir);
    args.insert(args.end(), {"--config", (dir / "bad.toml").string()});
    const auto result = RunProcess(args, dir / "bad.log", kProcessTimeout);
    EXPECT_EQ(result.exit_code, 1) << result.output;
    EXPECT_THAT(result.output, HasSubstr((dir / "bad.toml").string() + c.expected));
  }
}

TEST(Lifecycle, BadFlagValueExitsTwoNamingTheFlag) {
  TempDir dir;
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{{"--max-cache-bytes", "10X"},
                                                                                    {"--arch", "sm90"},
                                                                                    {"--listen", "nowhere"},
                                                                                    {"--workers", "0"},
                                                                                    {"--remote", "http://x"}}) {
    const auto result = RunProcess({testing::JitdBinary(), flag, value}, dir / "flag.log", kProcessTimeout);
    EXPECT_EQ(result.exit_code, 2) << flag << ": " << result.output;
    EXPECT_THAT(result.output, HasSubstr("jitd: " + flag + ":")) << flag;
  }
}

TEST(Lifecycle, LintAndWarmExitTwoSayingTheCompilerIsNotBuilt) {
  TempDir dir;
  const auto lint = RunProcess({testing::JitdBinary(), "lint", "--arch", "sm_90"}, dir / "lint.log", kProcessTimeout);
  EXPECT_EQ(lint.exit_code, 2);
  EXPECT_THAT(lint.output, HasSubstr("not part of this build"));
  const auto warm = RunProcess({testing::JitdBinary(), "warm", "--cache-dir", (dir / "c").string(), "--all"},
                               dir / "warm.log", kProcessTimeout);
  EXPECT_EQ(warm.exit_code, 2);
  EXPECT_THAT(warm.output, HasSubstr("not part of this build"));
}

TEST(Lifecycle, HelpNamesEveryContractFlagAndSubcommand) {
  TempDir dir;
  const auto help = RunProcess({testing::JitdBinary(), "--help"}, dir / "help.log", kProcessTimeout);
  EXPECT_EQ(help.exit_code, 0);
  for (const char* name : {"--config", "--listen", "--cache-dir", "--kernels", "--max-cache-bytes", "--workers",
                           "--arch", "--remote", "--metrics-listen", "--admin-token-file", "serve", "lint", "warm"}) {
    EXPECT_THAT(help.output, HasSubstr(name));
  }
}

TEST(Lifecycle, ServeSubcommandTakesTheSameFlags) {
  TempDir dir;
  std::vector<std::string> args = TestDaemon::DefaultArgs(dir);  // uses `serve`
  ASSERT_EQ(args[1], "serve");
  TestDaemon daemon(dir, {"--max-cache-bytes", "1G"});
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  EXPECT_EQ(daemon.Connect()->Stats()->max_bytes(), uint64_t{1} << 30);
}

}  // namespace
}  // namespace jitd
