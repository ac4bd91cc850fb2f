// jitctl run as a program against a real daemon: each verb makes its RPC,
// prints a table or one JSON document, and exits 0, 1 or 2 as documented.
#include <gmock/gmock.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "cache_seed.h"
#include "jitd/v1/cache_admin.pb.h"
#include "jitd/v1/compiler.pb.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using testing::kProcessTimeout;
using ::testing::Not;
using testing::ProcessResult;
using testing::TempDir;
using testing::TestDaemon;

class JitctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::SeedCache(dir_ / "cache", testing::ThreeEntries());
    std::ofstream(dir_ / "token") << "s3cret-token\n";
    // The seeded entries match no kernel served: no rewarm beside the test.
    daemon_ = std::make_unique<TestDaemon>(
        dir_, std::vector<std::string>{"--admin-token-file", (dir_ / "token").string(), "--rewarm-count", "0"});
    ASSERT_TRUE(daemon_->WaitUntilServing().ok());
  }

  // Runs `jitctl --endpoint <daemon> args...`.
  ProcessResult Jitctl(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {}) {
    std::vector<std::string> argv = {testing::JitctlBinary(), "--endpoint", daemon_->endpoint()};
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunProcess(argv, dir_ / "jitctl.log", kProcessTimeout, env);
  }

  TempDir dir_;
  std::unique_ptr<TestDaemon> daemon_;
};

TEST_F(JitctlTest, LsJsonIsOneDocumentListingThePublishedEntries) {
  const ProcessResult ls = Jitctl({"--json", "ls"});
  ASSERT_EQ(ls.exit_code, 0) << ls.output;
  v1::ListEntriesResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(ls.output, &parsed).ok()) << ls.output;
  EXPECT_EQ(parsed.total(), 3u);
  EXPECT_EQ(parsed.entries_size(), 3);
  EXPECT_THAT(ls.output, HasSubstr(std::string(32, 'a')));  // whole keys in JSON
  EXPECT_THAT(ls.output, HasSubstr("\"kernel\": \"moe.topk_sum\""));
}

TEST_F(JitctlTest, LsPrintsAnAlignedTableWithHumanSizes) {
  const ProcessResult ls = Jitctl({"ls", "--kernel", "moe.*"});
  ASSERT_EQ(ls.exit_code, 0) << ls.output;
  EXPECT_THAT(ls.output, HasSubstr("KEY"));
  EXPECT_THAT(ls.output, HasSubstr("LAST USED"));
  EXPECT_THAT(
      ls.output,
      // Seeded at SetUp: a loaded machine may take a second or more to get here.
      ContainsRegex("aaaaaaaaaaaaaaaa +moe.topk_sum +dtype=bf16 +sm_90 +4\\.[0-9] KiB +0 +(just now|[0-9.]+ ?s ago)"));
  EXPECT_THAT(ls.output, HasSubstr("moe.align_block"));
  EXPECT_THAT(ls.output, Not(HasSubstr("norm.rms")));
  EXPECT_THAT(ls.output, HasSubstr("2 of 2 entries"));
}

TEST_F(JitctlTest, StatsShowsTheCacheDirAndEntryCount) {
  const ProcessResult stats = Jitctl({"stats"});
  ASSERT_EQ(stats.exit_code, 0) << stats.output;
  EXPECT_THAT(stats.output, HasSubstr("cache dir  "));
  EXPECT_THAT(stats.output, HasSubstr((dir_ / "cache").string()));
  EXPECT_THAT(stats.output, HasSubstr("3 (0 pinned)"));
}

TEST_F(JitctlTest, EvictWithoutTheTokenFailsWithTheDaemonsMessageAndCode) {
  const ProcessResult evict = Jitctl({"evict", "--kernel", "moe.*"});
  EXPECT_EQ(evict.exit_code, 1);
  EXPECT_THAT(evict.output,
              HasSubstr("jitctl: evict: PERMISSION_DENIED: Evict needs the daemon's admin token, and jitctl has "
                        "none: there is no token file beside the socket"));
  EXPECT_THAT(evict.output, HasSubstr("the daemon was given its token with --admin-token-file"));
}

TEST_F(JitctlTest, EvictDryRunThenRealWithTheToken) {
  const std::string token_flag = "--admin-token-file=" + (dir_ / "token").string();
  const ProcessResult dry = Jitctl({token_flag, "evict", "--kernel", "moe.*", "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_THAT(dry.output, HasSubstr("would evict 2 entries"));
  const ProcessResult real = Jitctl({token_flag, "--json", "evict", "--older-than", "0s", "--kernel", "moe.*"});
  ASSERT_EQ(real.exit_code, 0) << real.output;
  v1::EvictResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(real.output, &parsed).ok());
  EXPECT_EQ(parsed.evicted_entries(), 2u);
  EXPECT_EQ(parsed.remaining_entries(), 1u);
}

TEST_F(JitctlTest, ASecondVerifyWithoutTheTokenWithinAMinuteIsToldWhenToRetry) {
  EXPECT_EQ(Jitctl({"verify"}).exit_code, 0);
  const ProcessResult again = Jitctl({"verify"});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_THAT(again.output, ::testing::ContainsRegex("RESOURCE_EXHAUSTED: a verify ran less than 60 s ago; without "
                                                     "the admin token one may run per 60 s: retry in [0-9]+ s"));
}

TEST_F(JitctlTest, EvictWithoutAFilterIsAUsageErrorBeforeAnyCall) {
  const ProcessResult evict = Jitctl({"evict"});
  EXPECT_EQ(evict.exit_code, 2);
  EXPECT_THAT(evict.output, HasSubstr("at least one of --max-bytes"));
}

TEST_F(JitctlTest, EvictRejectsBadSizesAndDurations) {
  EXPECT_EQ(Jitctl({"evict", "--max-bytes", "lots"}).exit_code, 2);
  const ProcessResult age = Jitctl({"evict", "--older-than", "3w"});
  EXPECT_EQ(age.exit_code, 2);
  EXPECT_THAT(age.output, HasSubstr("--older-than"));
}

TEST_F(JitctlTest, VerifyExitsZeroWhenCleanAndOneOnAFlippedByte) {
  // Twice in a row: the operator's (with the token), as a client without it
  // may verify once a minute.
  const std::string token_flag = "--admin-token-file=" + (dir_ / "token").string();
  EXPECT_EQ(Jitctl({token_flag, "verify"}).exit_code, 0);
  testing::FlipByte(testing::BlobPathOf(dir_ / "cache", std::string(32, 'c')));
  const ProcessResult verify = Jitctl({token_flag, "verify"});
  EXPECT_EQ(verify.exit_code, 1) << verify.output;
  EXPECT_THAT(verify.output, HasSubstr("problem: "));
  EXPECT_THAT(verify.output, HasSubstr(std::string(32, 'c')));
}

TEST_F(JitctlTest, GetPrintsKeySourceSizeCompileTimeAndSymbolsAndWritesTheCubin) {
  const std::string cubin = (dir_ / "k.cubin").string();
  const ProcessResult get =
      Jitctl({"get", "diffusion.modulate_scale_shift", "-p", "dtype=bf16", "--arch", "sm_90", "-o", cubin});
  ASSERT_EQ(get.exit_code, 0) << get.output;
  EXPECT_THAT(get.output, ContainsRegex("key +[0-9a-f]{64}"));
  EXPECT_THAT(get.output, ContainsRegex("origin +compiled \\(by NVRTC"));
  EXPECT_THAT(get.output, ContainsRegex("cubin +[0-9.]+ KiB -> " + cubin));
  EXPECT_THAT(get.output, ContainsRegex("compile +[0-9.]+ ms \\(NVRTC 1[0-9]\\.[0-9]\\)"));
  EXPECT_THAT(get.output, HasSubstr("NAME EXPRESSION"));
  EXPECT_THAT(get.output,
              ContainsRegex("sglang::modulate_scale_shift::modulate_scale_shift_kernel<__nv_bfloat16> +_Z"));
  std::ifstream file(cubin, std::ios::binary);
  std::string magic(4, '\0');
  file.read(magic.data(), 4);
  EXPECT_EQ(magic,
            "\x7f"
            "ELF");

  // Asked again, the daemon answers from memory; --json is one document.
  const ProcessResult json =
      Jitctl({"--json", "get", "diffusion.modulate_scale_shift", "-p", "dtype=bf16", "--arch", "sm_90"});
  ASSERT_EQ(json.exit_code, 0) << json.output;
  // The response's fields, after what was asked for (kernel, params).
  v1::GetKernelResponse parsed;
  google::protobuf::util::JsonParseOptions lenient;
  lenient.ignore_unknown_fields = true;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.output, &parsed, lenient).ok()) << json.output;
  EXPECT_THAT(json.output, HasSubstr("\"kernel\": \"diffusion.modulate_scale_shift\""));
  EXPECT_EQ(parsed.source(), v1::GetKernelResponse::MEMORY);
  EXPECT_EQ(parsed.cubin_size(), std::filesystem::file_size(cubin));
  EXPECT_TRUE(parsed.cubin().empty());  // bytes go to -o, never into the document
  ASSERT_EQ(parsed.symbols_size(), 1);
}

TEST_F(JitctlTest, GetReportsTheDaemonsErrorAndWritesNothing) {
  const ProcessResult get =
      Jitctl({"get", "diffusion.modulate_scale_shif", "-p", "dtype=bf16", "-o", (dir_ / "k.cubin").string()});
  EXPECT_EQ(get.exit_code, 1);
  EXPECT_THAT(get.output, HasSubstr("jitctl: get: NOT_FOUND: unknown kernel"));
  EXPECT_THAT(get.output, HasSubstr("diffusion.modulate_scale_shift"));  // the close match
  EXPECT_FALSE(std::filesystem::exists(dir_ / "k.cubin"));
}

TEST_F(JitctlTest, GetRejectsAParamWithoutEquals) {
  const ProcessResult get = Jitctl({"get", "k", "-p", "dtype"});
  EXPECT_EQ(get.exit_code, 2);
  EXPECT_THAT(get.output, HasSubstr("expected K=V"));
}

// Two instantiations that compile (tens of milliseconds each) and one the
// daemon refuses.
void WriteWarmSpecs(const std::filesystem::path& file) {
  std::ofstream(file) << R"toml(
[[spec]]
kernel = "diffusion.modulate_scale_shift"
params = { dtype = "bf16" }
[[spec]]
kernel = "diffusion.modulate_scale_shift"
params = { dtype = "fp16" }
[[spec]]
kernel = "diffusion.modulate_scale_shift"
params = { dtype = "fp64" }
)toml";
}

TEST_F(JitctlTest, WarmShowsProgressThenASummaryWithEachFailureAndItsReason) {
  WriteWarmSpecs(dir_ / "specs.toml");
  const ProcessResult warm = Jitctl({"warm", "--manifest", (dir_ / "specs.toml").string(), "--arch", "sm_90"});
  EXPECT_EQ(warm.exit_code, 1) << warm.output;  // one failed
  // Not a terminal: one plain progress line per instantiation.
  EXPECT_THAT(warm.output, ContainsRegex("\\[[123]/3\\] compiled +diffusion.modulate_scale_shift\\{dtype=bf16\\}"));
  EXPECT_THAT(warm.output, ContainsRegex("\\[[123]/3\\] failed +diffusion.modulate_scale_shift\\{dtype=fp64\\}"));
  EXPECT_THAT(warm.output, HasSubstr("warm: 3 instantiations in "));
  EXPECT_THAT(warm.output, HasSubstr(": 2 compiled, 0 already cached, 1 failed"));
  EXPECT_THAT(warm.output, ContainsRegex("failed: diffusion.modulate_scale_shift\\{dtype=fp64\\}@sm_90: .*fp64"));

  // Again: everything that compiled is now cached.
  const ProcessResult again =
      Jitctl({"--json", "warm", "--manifest", (dir_ / "specs.toml").string(), "--arch", "sm_90"});
  EXPECT_EQ(again.exit_code, 1);
  google::protobuf::Value parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(again.output, &parsed).ok()) << again.output;
  const auto& fields = parsed.struct_value().fields();
  EXPECT_EQ(fields.at("total").number_value(), 3);
  EXPECT_EQ(fields.at("compiled").number_value(), 0);
  EXPECT_EQ(fields.at("cached").number_value(), 2);
  EXPECT_EQ(fields.at("failed").number_value(), 1);
  ASSERT_EQ(fields.at("failures").list_value().values_size(), 1);
  EXPECT_THAT(fields.at("failures").list_value().values(0).struct_value().fields().at("error").string_value(),
              HasSubstr("fp64"));
  EXPECT_EQ(fields.at("progress").list_value().values_size(), 3);
}

TEST_F(JitctlTest, KernelsListsTheManifest) {
  const ProcessResult kernels = Jitctl({"kernels"});
  EXPECT_EQ(kernels.exit_code, 0) << kernels.output;
  EXPECT_THAT(kernels.output, HasSubstr("diffusion.modulate_scale_shift"));
  EXPECT_THAT(kernels.output, HasSubstr("Signatures and launch rules: jitctl kernels -l [GLOB]"));
}

TEST_F(JitctlTest, KernelsLongShowsEachKernelsSignatureAndLaunchRule) {
  const ProcessResult kernels = Jitctl({"kernels", "-l", "moe.*"});
  ASSERT_EQ(kernels.exit_code, 0) << kernels.output;
  EXPECT_THAT(kernels.output, HasSubstr("moe.topk_sum\n"));
  EXPECT_THAT(kernels.output, ContainsRegex("  entry point +sglang::moe::topk_sum_kernel<\\{dtype\\}>"));
  EXPECT_THAT(kernels.output,
              ContainsRegex("  signature +\\(T\\* out, const T\\* in, int64_t rows, int32_t topk, int64_t dim\\)"));
  EXPECT_THAT(kernels.output, ContainsRegex("  launch +element-wise: any 1-D grid and block"));
  EXPECT_THAT(kernels.output, ContainsRegex("  launch +one warp: grid \\(1,1,1\\), block \\(32,1,1\\)"));
  EXPECT_THAT(kernels.output, Not(HasSubstr("diffusion.")));
  EXPECT_THAT(kernels.output, HasSubstr("3 kernels;"));
  const ProcessResult one = Jitctl({"kernels", "-l", "norm.rmsnorm"});
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_THAT(one.output, HasSubstr("\n1 kernel;"));
  EXPECT_THAT(one.output, ContainsRegex("  params +dtype=bf16\\|fp16\\|fp32 threads=128\\|256\\|512\\|1024\n"))
      << "no '(* = default)' where no param has a default";
  EXPECT_THAT(one.output, HasSubstr("jitd.rmsnorm_threads(dim)"));
}

TEST_F(JitctlTest, WarmNeedsAllOrAManifest) { EXPECT_EQ(Jitctl({"warm"}).exit_code, 2); }

TEST_F(JitctlTest, EndpointComesFromJitdEndpointWhenNotGiven) {
  const ProcessResult stats = testing::RunProcess({testing::JitctlBinary(), "stats"}, dir_ / "env.log", kProcessTimeout,
                                                  {{"JITD_ENDPOINT", daemon_->endpoint()}});
  EXPECT_EQ(stats.exit_code, 0) << stats.output;
}

TEST(JitctlWithoutDaemon, FailsFastNamingTheEndpoint) {
  TempDir dir;
  const std::string endpoint = "unix:" + (dir / "absent.sock").string();
  const ProcessResult stats =
      testing::RunProcess({testing::JitctlBinary(), "--endpoint", endpoint, "stats"}, dir / "log", kProcessTimeout);
  EXPECT_EQ(stats.exit_code, 1);
  EXPECT_THAT(stats.output, HasSubstr("UNAVAILABLE: cannot reach jitd at " + endpoint));
  EXPECT_LT(stats.elapsed, std::chrono::seconds(2));
}

// With --json an error is a JSON object too (on standard output), for the
// script that parses what jitctl prints.
TEST(JitctlWithoutDaemon, WithJsonTheErrorIsAJsonObject) {
  TempDir dir;
  const std::string endpoint = "unix:" + (dir / "absent.sock").string();
  const ProcessResult stats = testing::RunProcess({testing::JitctlBinary(), "--json", "--endpoint", endpoint, "stats"},
                                                  dir / "log", kProcessTimeout);
  EXPECT_EQ(stats.exit_code, 1);
  EXPECT_THAT(stats.output, HasSubstr("{\"error\": {\"verb\": \"stats\", \"code\": \"UNAVAILABLE\", "
                                      "\"message\": \"cannot reach jitd at " +
                                      endpoint));
  EXPECT_THAT(stats.output, HasSubstr("\"exit\": 1}}"));
}

TEST(JitctlWithoutDaemon, FailsFastOnAStaleSocketFile) {
  // A socket file with nobody listening: the connection is refused at once.
  TempDir dir;
  TestDaemon daemon(dir);
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  daemon.process().Signal(SIGKILL);  // leaves its socket file behind
  ASSERT_TRUE(daemon.process().WaitForExit(kProcessTimeout).has_value());
  ASSERT_TRUE(std::filesystem::exists(daemon.socket_path()));
  const ProcessResult stats = testing::RunProcess({testing::JitctlBinary(), "--endpoint", daemon.endpoint(), "stats"},
                                                  dir / "log", kProcessTimeout);
  EXPECT_EQ(stats.exit_code, 1);
  EXPECT_THAT(stats.output, HasSubstr("cannot reach jitd at " + daemon.endpoint()));
  EXPECT_LT(stats.elapsed, std::chrono::seconds(4));
}

TEST(JitctlAsAnotherUser, IsToldPermissionDeniedAndTheGroupToJoinNotConnectionRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "running jitctl as another user needs root";
  if (::access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "needs setpriv (util-linux)";
  TempDir dir;
  TestDaemon daemon(dir);
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  ASSERT_EQ(::chmod(dir.path().c_str(), 0711), 0);  // others may enter, the socket stays 0660
  const ProcessResult stats =
      testing::RunProcess({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                           testing::JitctlBinary(), "--endpoint", daemon.endpoint(), "stats"},
                          dir / "log", kProcessTimeout);
  EXPECT_NE(stats.exit_code, 0);
  EXPECT_THAT(stats.output, HasSubstr("permission denied: the socket is mode 0660"));
  EXPECT_THAT(stats.output, HasSubstr("this user (uid 65534) is not in group"));
  EXPECT_THAT(stats.output, Not(HasSubstr("is the daemon running")));
}

TEST(JitctlWithoutDaemon, HelpListsEveryContractVerb) {
  TempDir dir;
  const ProcessResult help = testing::RunProcess({testing::JitctlBinary(), "--help"}, dir / "log", kProcessTimeout);
  EXPECT_EQ(help.exit_code, 0);
  for (const char* verb : {"get", "kernels", "warm", "ls", "stats", "evict", "verify", "health"}) {
    EXPECT_THAT(help.output, HasSubstr(std::string("  ") + verb + " ")) << verb;
  }
}

}  // namespace
}  // namespace jitd
