// jitd as a process: start-up checks, configuration, sockets, shutdown.
#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "kernel_fixtures.h"
#include "poll_until.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using ::testing::HasSubstr;
using testing::kProcessTimeout;
using ::testing::Not;
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

TEST(Lifecycle, SigtermDoesNotWaitForIdleConnectedClients) {
  TempDir dir;
  TestDaemon daemon(dir);
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  // A client that stays connected, as an inference server's channel does.
  std::unique_ptr<Client> client = daemon.Connect();
  ASSERT_TRUE(client->Stats().ok());
  const auto signalled = std::chrono::steady_clock::now();
  daemon.process().Signal(SIGTERM);
  EXPECT_EQ(daemon.process().WaitForExit(kExitTimeout), 0) << daemon.process().Output();
  // Nothing was in flight: no reason to sit out the 5 s drain deadline
  // (below it by what a loaded, sanitized exit may take).
  EXPECT_LT(std::chrono::steady_clock::now() - signalled, std::chrono::milliseconds(4500));
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
  ASSERT_TRUE(daemon.WaitUntilLoggedReady().ok());
  const std::string log = daemon.process().Output();
  EXPECT_THAT(log, HasSubstr("jitd " JITD_VERSION " starting"));
  EXPECT_THAT(log, HasSubstr(daemon.endpoint()));
  EXPECT_THAT(log, HasSubstr((dir / "cache").string()));
  EXPECT_THAT(log, HasSubstr("0.5 GiB"));
  EXPECT_THAT(log, HasSubstr("kernels " + testing::ShippedKernelsDir().string()));
  // The ready line names what is served: how many kernels, from where, which version of them.
  EXPECT_THAT(log, ::testing::ContainsRegex("jitd ready: serving on " + daemon.endpoint() + "; 7 kernels from " +
                                            testing::ShippedKernelsDir().string() + ", fingerprint [0-9a-f]{12}"));
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

TEST(Lifecycle, SecondDaemonOnTheSameCacheDirectoryRefusesNamingTheFirst) {
  TempDir dir;
  TestDaemon first(dir);
  ASSERT_TRUE(first.WaitUntilServing().ok());

  std::vector<std::string> args = TestDaemon::DefaultArgs(dir);
  args[3] = "unix:" + (dir / "other.sock").string();  // another socket, the same cache
  const auto second = RunProcess(args, dir / "second.log", kProcessTimeout);
  EXPECT_EQ(second.exit_code, 1) << second.output;
  EXPECT_THAT(second.output,
              HasSubstr("is already served by another jitd (pid " + std::to_string(first.process().pid())));
  EXPECT_THAT(second.output, HasSubstr(first.endpoint()));
  EXPECT_THAT(second.output, HasSubstr("another --cache-dir"));

  absl::StatusOr<bool> serving = first.Connect()->IsServing();
  ASSERT_TRUE(serving.ok()) << serving.status();
  EXPECT_TRUE(*serving);
}

TEST(Lifecycle, ADaemonKilledWithSigkillDoesNotLockItsCacheDirectory) {
  TempDir dir;
  {
    TestDaemon first(dir);
    ASSERT_TRUE(first.WaitUntilServing().ok());
    first.process().Signal(SIGKILL);
    ASSERT_TRUE(first.process().WaitForExit(kExitTimeout).has_value());
    // Its lock file and its socket stay behind.
    EXPECT_TRUE(std::filesystem::exists(dir / "cache" / "daemon.lock"));
  }
  TestDaemon next(dir);
  EXPECT_TRUE(next.WaitUntilServing().ok()) << next.process().Output();
}

TEST(Lifecycle, JitdWarmAndTheDaemonWriteOneCacheDirectoryAtTheSameTime) {
  TempDir dir;
  TestDaemon daemon(dir, {"--kernels", testing::SmallKernelsDir().string(), "--hot-cache-bytes", "0"});
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  // jitd warm compiles every instantiation into the daemon's directory
  // while clients ask the daemon for the same ones (both compile, both
  // publish: the first publish of a key wins, the other is dropped).
  testing::Process warm({testing::JitdBinary(), "warm", "--all", "--kernels", testing::SmallKernelsDir().string(),
                         "--cache-dir", daemon.cache_dir().string(), "--workers", "1"},
                        dir / "warm.log");
  const std::vector<std::pair<std::string, std::map<std::string, std::string>>> specs = {
      {"small.fill", {{"dtype", "fp32"}}},        {"small.fill", {{"dtype", "fp64"}}},
      {"small.scale", {{"clamp", "off"}}},        {"small.scale", {{"clamp", "on"}}},
      {"small.block_sum", {{"threads", "1024"}}}, {"small.block_sum", {{"threads", "128"}}}};
  std::unique_ptr<Client> client = daemon.Connect("", std::chrono::seconds(120));
  std::map<std::string, std::string> served;  // key -> cubin, as the daemon answered while warm ran
  for (const auto& [kernel, params] : specs) {
    absl::StatusOr<v1::GetKernelResponse> r = client->GetKernel(testing::KernelRequest(kernel, params));
    ASSERT_TRUE(r.ok()) << kernel << ": " << r.status();
    served[r->key()] = r->cubin();
  }
  // One kernel of the small set is broken on purpose: warm reports it and
  // exits 1, having stored the others.
  const std::optional<int> warm_exit = warm.WaitForExit(std::chrono::seconds(120));
  ASSERT_TRUE(warm_exit.has_value()) << warm.Output();
  EXPECT_EQ(*warm_exit, 1) << warm.Output();
  EXPECT_THAT(warm.Output(), Not(HasSubstr("already served")));
  EXPECT_THAT(warm.Output(), HasSubstr("9 instantiations"));

  // One entry per key, every one verifies, and each is what the daemon
  // answered while both wrote.
  v1::VerifyRequest verify;
  absl::StatusOr<v1::VerifyResponse> verified = client->Verify(verify);
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_EQ(verified->corrupt(), 0u);
  EXPECT_EQ(verified->orphan_blobs(), 0u) << "a losing publish left its blob behind";
  EXPECT_EQ(daemon.Stats().entries(), 8u) << "4 trivial and 4 block_sum instantiations, each stored once";
  for (const auto& [kernel, params] : specs) {
    absl::StatusOr<v1::GetKernelResponse> r = client->GetKernel(testing::KernelRequest(kernel, params));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->source(), v1::GetKernelResponse::DISK);
    EXPECT_EQ(r->cubin(), served[r->key()]) << kernel;
  }
}

TEST(Lifecycle, SocketGroupGivesTheSocketToThatGroup) {
  TempDir dir;
  const struct group* nogroup = getgrnam("nogroup");
  ASSERT_NE(nogroup, nullptr) << "Debian has a group 'nogroup'";
  TestDaemon daemon(dir, {"--socket-group", "nogroup"});
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  struct stat st {};
  ASSERT_EQ(stat(daemon.socket_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, nogroup->gr_gid);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  // The admin token stays the daemon's user's alone.
  ASSERT_EQ(stat((daemon.socket_path().string() + ".admin-token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(Lifecycle, AnUnknownSocketGroupIsAUsageError) {
  TempDir dir;
  std::vector<std::string> args = TestDaemon::DefaultArgs(dir);
  args.insert(args.end(), {"--socket-group", "no-such-group-here"});
  const auto r = RunProcess(args, dir / "jitd.log", kProcessTimeout);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("no group 'no-such-group-here'"));
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
  // The ready line follows the first SERVING answer.
  EXPECT_TRUE(
      testing::PollUntil([&] { return daemon.Output().find("jitd ready") != std::string::npos; }, kProcessTimeout));
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
                                                                                    {"--remote", "http://x"},
                                                                                    {"--max-queue", "0"},
                                                                                    {"--hot-cache-bytes", "1X"},
                                                                                    {"--negative-ttl", "soon"},
                                                                                    {"--negative-ttl", "2d"}}) {
    const auto result = RunProcess({testing::JitdBinary(), flag, value}, dir / "flag.log", kProcessTimeout);
    EXPECT_EQ(result.exit_code, 2) << flag << ": " << result.output;
    EXPECT_THAT(result.output, HasSubstr("jitd: " + flag + ":")) << flag;
  }
}

TEST(Lifecycle, OfflineWarmFillsACacheThatADaemonThenServesFromDisk) {
  TempDir dir;
  testing::WriteFile(dir / "specs.toml", "[[spec]]\nkernel = \"small.fill\"\nparams = { dtype = \"fp64\" }\n");
  const auto warm = RunProcess({testing::JitdBinary(), "warm", "--cache-dir", (dir / "cache").string(), "--kernels",
                                testing::SmallKernelsDir().string(), "--manifest", (dir / "specs.toml").string()},
                               dir / "warm.log", std::chrono::minutes(2));
  ASSERT_EQ(warm.exit_code, 0) << warm.output;

  TestDaemon daemon(dir, {"--kernels", testing::SmallKernelsDir().string()});
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  absl::StatusOr<v1::GetKernelResponse> served = daemon.Connect()->GetKernel(
      testing::KernelRequest("small.fill", {{"dtype", "fp64"}}, v1::GetKernelRequest::CACHED_ONLY));
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->source(), v1::GetKernelResponse::DISK);
}

TEST(Lifecycle, OfflineWarmStopsOnSigint) {
  TempDir dir;
  testing::Process warm({testing::JitdBinary(), "warm", "--cache-dir", (dir / "cache").string(), "--kernels",
                         testing::SmallKernelsDir().string(), "--all", "--workers", "1"},
                        dir / "warm.log");
  // The cache is open, so the compiles (seconds of CUB) have begun.
  ASSERT_TRUE(testing::PollUntil([&] { return std::filesystem::exists(dir / "cache/index.sqlite"); }, kProcessTimeout));
  warm.Signal(SIGINT);
  EXPECT_EQ(warm.WaitForExit(kExitTimeout), 128 + SIGINT) << warm.Output();
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

// A mistyped command or flag gets what was probably meant, as jitctl's do.
TEST(Lifecycle, AMistypedCommandOrFlagIsAUsageErrorNamingTheCloseOnes) {
  TempDir dir;
  const auto verb = RunProcess({testing::JitdBinary(), "lnt"}, dir / "verb.log", kProcessTimeout);
  EXPECT_EQ(verb.exit_code, 2);
  EXPECT_THAT(verb.output, HasSubstr("unknown command lnt; did you mean lint?"));
  const auto flag = RunProcess({testing::JitdBinary(), "--cache-dri", "x"}, dir / "flag.log", kProcessTimeout);
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_THAT(flag.output, HasSubstr("unknown option --cache-dri; did you mean --cache-dir?"));
  const auto warm = RunProcess({testing::JitdBinary(), "warm", "--cache-dir", (dir / "c").string(), "--al"},
                               dir / "warm.log", kProcessTimeout);
  EXPECT_EQ(warm.exit_code, 2);
  EXPECT_THAT(warm.output, HasSubstr("unknown option --al; did you mean --all"));
  EXPECT_THAT(warm.output, ::testing::Not(HasSubstr("--allow-guard-findings"))) << "a serve flag, not warm's";
  EXPECT_THAT(warm.output, HasSubstr("Run `jitd warm --help`"));
}

// Shell completion, generated from each binary's own flags and verbs: bash
// loads it and completes a verb, a subcommand's option and a nested verb.
TEST(Lifecycle, BashCompletionOfBothBinariesCompletesVerbsAndOptions) {
  TempDir dir;
  const auto complete = [&](const std::string& binary, const std::string& program, const std::string& words) {
    const std::string script = "source <(" + binary + " --completion bash) && COMP_WORDS=(" + words +
                               ") && COMP_CWORD=$((${#COMP_WORDS[@]} - 1)) && _" + program +
                               " && echo \"[${COMPREPLY[*]}]\"";
    return RunProcess({"/bin/bash", "-c", script}, dir / "complete.log", kProcessTimeout);
  };
  const std::string jitd = testing::JitdBinary(), jitctl = testing::JitctlBinary();
  EXPECT_THAT(complete(jitd, "jitd", "jitd wa").output, HasSubstr("[warm]"));
  EXPECT_THAT(complete(jitd, "jitd", "jitd warm --cache-d").output, HasSubstr("[--cache-dir]"));
  EXPECT_THAT(complete(jitd, "jitd", "jitd bundle cr").output, HasSubstr("[create]"));
  EXPECT_THAT(complete(jitd, "jitd", "jitd --allow-guard").output, HasSubstr("[--allow-guard-findings]"));
  EXPECT_THAT(complete(jitctl, "jitctl", "jitctl ev").output, HasSubstr("[evict]"));
  EXPECT_THAT(complete(jitctl, "jitctl", "jitctl ls --tr").output, HasSubstr("[--tree]"));
  EXPECT_THAT(complete(jitctl, "jitctl", "jitctl stats --js").output, HasSubstr("[--json]")) << "a global option";
  const auto bad = RunProcess({jitd, "--completion", "tcsh"}, dir / "bad.log", kProcessTimeout);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.output, HasSubstr("not a shell this prints a script for (bash)"));
}

// --version names the build and what it compiles with.
TEST(Lifecycle, VersionNamesTheRevisionAndNvrtc) {
  TempDir dir;
  const auto version = RunProcess({testing::JitdBinary(), "--version"}, dir / "version.log", kProcessTimeout);
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_THAT(version.output, ::testing::ContainsRegex("^jitd [0-9]+\\.[0-9]+\\.[0-9]+ \\(git [^)]+\\)"));
  EXPECT_THAT(version.output, ::testing::ContainsRegex("NVRTC [0-9]+\\.[0-9]+ \\(loaded now\\)"));
  EXPECT_THAT(version.output, HasSubstr("CUDA 13.0 toolkit"));
}

TEST(Lifecycle, HelpNamesTheServingFlags) {
  TempDir dir;
  const auto help = RunProcess({testing::JitdBinary(), "--help"}, dir / "help.log", kProcessTimeout);
  EXPECT_EQ(help.exit_code, 0);
  for (const char* name :
       {"--max-queue", "--hot-cache-bytes", "--negative-ttl", "--log-hits", "--allow-guard-findings", "--tls-cert",
        "--tls-key", "--tls-client-ca", "--insecure-tcp", "--socket-group", "--max-calls-per-peer"}) {
    EXPECT_THAT(help.output, HasSubstr(name));
  }
}

TEST(Lifecycle, ServingSettingsFromTheConfigFileReachTheDaemonAndFlagsOverrideThem) {
  TempDir dir;
  std::ofstream(dir / "jitd.toml") << "workers = 1\nmax_queue = 7\nhot_cache_bytes = \"1M\"\n"
                                   << "negative_ttl = \"2m\"\nlog_hits = true\n";
  TestDaemon daemon(dir, {"--config", (dir / "jitd.toml").string(), "--kernels", testing::SmallKernelsDir().string(),
                          "--max-queue", "9"});
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  const v1::StatsResponse stats = daemon.Stats();
  EXPECT_EQ(stats.workers(), 1u);
  EXPECT_EQ(stats.max_queue(), 9u);
  EXPECT_EQ(stats.hot_max_bytes(), 1u << 20);
  std::unique_ptr<Client> client = daemon.Connect();
  EXPECT_FALSE(client->GetKernel(testing::KernelRequest("small.broken")).ok());
  EXPECT_THAT(std::string(client->GetKernel(testing::KernelRequest("small.broken")).status().message()),
              HasSubstr("remembered for up to 120 s"));
  ASSERT_TRUE(client->GetKernel(testing::KernelRequest("small.scale")).ok());
  ASSERT_TRUE(client->GetKernel(testing::KernelRequest("small.scale")).ok());
  EXPECT_THAT(daemon.process().Output(), HasSubstr("hit small.scale"));
}

TEST(Lifecycle, RefusesToStartOnGuardFindingsListingEachAndTheOverride) {
  TempDir dir;
  std::vector<std::string> args = TestDaemon::DefaultArgs(dir);
  args.insert(args.end(), {"--kernels", testing::SeedMissesDir().string()});
  const auto result = RunProcess(args, dir / "refused.log", kProcessTimeout);
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output, HasSubstr("modulate_scale_shift.cu:6: [diffusion.modulate_scale_shift] "
                                       "`namespace sglang_modulate_scale_shift`"));
  EXPECT_THAT(result.output, HasSubstr("residual_gate_add.cu:3: [diffusion.residual_gate_add] "
                                       "top-level anonymous namespace"));
  EXPECT_THAT(result.output, HasSubstr("fail the namespace guard's source check with 2 finding(s)"));
  EXPECT_THAT(result.output, HasSubstr("--allow-guard-findings"));
  EXPECT_FALSE(std::filesystem::exists(dir / "jitd.sock"));
}

TEST(Lifecycle, StartsDespiteGuardFindingsWithAllowGuardFindingsAndWarns) {
  TempDir dir;
  TestDaemon daemon(dir, {"--kernels", testing::SeedMissesDir().string(), "--allow-guard-findings"});
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  EXPECT_THAT(daemon.process().Output(), HasSubstr("[warning] namespace guard: diffusion/modulate_scale_shift.cu:6"));
  EXPECT_THAT(daemon.process().Output(), HasSubstr("serving kernels with 2 namespace guard finding(s)"));
  absl::StatusOr<v1::ListKernelsResponse> listed = daemon.Connect()->ListKernels({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->kernels_size(), 3);
}

TEST(Lifecycle, SigtermWhileASlowCompileIsInFlightLetsTheCallFinishThenExitsZero) {
  TempDir dir;
  TestDaemon daemon(dir, {"--kernels", testing::SmallKernelsDir().string()});
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  absl::StatusOr<v1::GetKernelResponse> answer = absl::UnknownError("not answered");
  std::thread caller([&] {
    answer = daemon.Connect("", std::chrono::seconds(60))
                 ->GetKernel(testing::KernelRequest("small.block_sum", {{"threads", "1024"}}));
  });
  ASSERT_TRUE(testing::PollUntil([&] { return daemon.Stats().busy_workers() == 1; }, kProcessTimeout));
  daemon.process().Signal(SIGTERM);
  caller.join();
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->source(), v1::GetKernelResponse::COMPILED);
  EXPECT_EQ(daemon.process().WaitForExit(kExitTimeout), 0) << daemon.process().Output();
  EXPECT_THAT(daemon.process().Output(), HasSubstr("received SIGTERM; draining"));

  // It was stored before the daemon exited.
  TestDaemon again(dir, {"--kernels", testing::SmallKernelsDir().string()});
  ASSERT_TRUE(again.WaitUntilServing().ok()) << again.process().Output();
  EXPECT_EQ(again.Stats().entries(), 1u);
}

TEST(Lifecycle, RestartKeepsEveryEntry) {
  TempDir dir;
  const std::vector<std::string> args = {"--kernels", testing::SmallKernelsDir().string()};
  std::vector<std::string> keys;
  {
    TestDaemon daemon(dir, args);
    ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
    v1::WarmRequest warm;
    for (const auto& [kernel, params] : std::vector<std::pair<std::string, std::map<std::string, std::string>>>{
             {"small.fill", {{"dtype", "fp32"}}},
             {"small.fill", {{"dtype", "fp64"}}},
             {"small.scale", {{"clamp", "off"}}},
             {"small.scale", {{"clamp", "on"}}},
             {"small.block_sum", {{"threads", "128"}}}}) {
      v1::KernelSpec* spec = warm.add_specs();
      spec->set_kernel(kernel);
      spec->mutable_params()->insert(params.begin(), params.end());
    }
    absl::StatusOr<v1::WarmProgress> warmed =
        daemon.Connect()->Warm(warm, [&](const v1::WarmProgress& progress) { keys.push_back(progress.key()); });
    ASSERT_TRUE(warmed.ok()) << warmed.status();
    ASSERT_EQ(warmed->compiled(), 5u);
    daemon.process().Signal(SIGTERM);
    ASSERT_EQ(daemon.process().WaitForExit(kExitTimeout), 0) << daemon.process().Output();
  }
  TestDaemon daemon(dir, args);
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  absl::StatusOr<v1::ListEntriesResponse> listed = daemon.Connect()->ListEntries({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::vector<std::string> listed_keys;
  for (const v1::EntryInfo& entry : listed->entries()) listed_keys.push_back(entry.key());
  EXPECT_THAT(listed_keys, ::testing::UnorderedElementsAreArray(keys));
  // And each is served from disk: nothing to recompile.
  v1::WarmRequest again;
  for (const v1::EntryInfo& entry : listed->entries()) {
    v1::KernelSpec* spec = again.add_specs();
    spec->set_kernel(entry.kernel());
    const std::string& params = entry.params();
    (*spec->mutable_params())[params.substr(0, params.find('='))] = params.substr(params.find('=') + 1);
  }
  absl::StatusOr<v1::WarmProgress> rewarmed = daemon.Connect()->Warm(again, nullptr);
  ASSERT_TRUE(rewarmed.ok()) << rewarmed.status();
  EXPECT_EQ(rewarmed->cached(), 5u);
  EXPECT_EQ(daemon.Stats().compiles(), 0u);
  EXPECT_EQ(daemon.Stats().disk_hits(), 5u);
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
