// jitctl as scripts and people meet it, against a real daemon: every
// verb's --json parsed by a real JSON parser (google.protobuf.Value) and
// its numbers checked to be JSON numbers; global flags before or after the
// verb; "did you mean" for a mistyped verb or option.
#include <gmock/gmock.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "jitd/client.h"
#include "kernel_fixtures.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using google::protobuf::Value;
using ::testing::HasSubstr;
using testing::ProcessResult;
using testing::TempDir;
using testing::TestDaemon;

// The document a run printed, parsed; fails the test when it is not JSON.
Value Parse(const ProcessResult& run) {
  Value value;
  const auto parsed = google::protobuf::util::JsonStringToMessage(run.output, &value);
  EXPECT_TRUE(parsed.ok()) << parsed.ToString() << "\n" << run.output;
  return value;
}

const Value& Field(const Value& object, const std::string& name) {
  static const Value kMissing;
  const auto& fields = object.struct_value().fields();
  const auto it = fields.find(name);
  EXPECT_NE(it, fields.end()) << "no \"" << name << "\" in " << object.ShortDebugString();
  return it == fields.end() ? kMissing : it->second;
}

void ExpectNumber(const Value& object, const std::string& name) {
  EXPECT_EQ(Field(object, name).kind_case(), Value::kNumberValue)
      << "\"" << name << "\" is not a JSON number in " << object.ShortDebugString();
}

class JitctlCli : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<TestDaemon>(
        dir_, std::vector<std::string>{"--kernels", testing::SmallKernelsDir().string(), "--workers", "1"});
    ASSERT_TRUE(daemon_->WaitUntilServing().ok()) << daemon_->process().Output();
  }
  ProcessResult Jitctl(const std::vector<std::string>& args) {
    ProcessResult run = daemon_->Jitctl(args);
    EXPECT_NE(run.exit_code, -1) << "timed out: jitctl " << ::testing::PrintToString(args);
    return run;
  }

  TempDir dir_;
  std::unique_ptr<TestDaemon> daemon_;
};

TEST_F(JitctlCli, EveryVerbsJsonIsOneDocumentWhoseNumbersAreNumbers) {
  const Value got = Parse(Jitctl({"--json", "get", "small.fill", "-p", "dtype=fp32"}));
  EXPECT_EQ(Field(got, "kernel").string_value(), "small.fill");
  EXPECT_EQ(Field(Field(got, "params"), "dtype").string_value(), "fp32");
  EXPECT_EQ(got.struct_value().fields().count("cubin"), 0u) << "the cubin's bytes go to -o, not into the document";
  ExpectNumber(got, "cubin_size");
  ExpectNumber(got, "compile_ms");
  EXPECT_GT(Field(got, "cubin_size").number_value(), 0);

  const Value stats = Parse(Jitctl({"--json", "stats"}));
  for (const char* name : {"entries", "bytes", "max_bytes", "hits", "misses", "workers", "compiles", "uptime_s"}) {
    ExpectNumber(stats, name);
  }
  EXPECT_EQ(Field(stats, "entries").number_value() + 1, 2) << "usable in arithmetic, as jq '.entries + 1' is";

  const Value ls = Parse(Jitctl({"--json", "ls"}));
  ExpectNumber(ls, "total");
  ASSERT_EQ(Field(ls, "entries").list_value().values_size(), 1);
  const Value& entry = Field(ls, "entries").list_value().values(0);
  for (const char* name : {"size_bytes", "created_unix_ms", "last_used_unix_ms", "hits", "compile_ms"}) {
    ExpectNumber(entry, name);
  }
  EXPECT_EQ(Field(entry, "pinned").kind_case(), Value::kBoolValue);

  const Value kernels = Parse(Jitctl({"--json", "kernels"}));
  EXPECT_GT(Field(kernels, "kernels").list_value().values_size(), 0);

  const Value verify = Parse(Jitctl({"--json", "verify"}));
  ExpectNumber(verify, "checked");
  ExpectNumber(verify, "corrupt");

  const Value evict = Parse(Jitctl({"--json", "evict", "--dry-run", "--kernel", "small.*"}));
  ExpectNumber(evict, "evicted_entries");
  ExpectNumber(evict, "remaining_bytes");

  const Value warm = Parse(Jitctl({"--json", "warm", "--all"}));
  for (const char* name : {"total", "compiled", "cached", "failed", "elapsed_ms"}) ExpectNumber(warm, name);
  EXPECT_EQ(Field(warm, "progress").kind_case(), Value::kListValue);

  const Value health = Parse(Jitctl({"--json", "health"}));
  EXPECT_EQ(Field(health, "status").string_value(), "SERVING");
}

TEST_F(JitctlCli, GlobalFlagsWorkBeforeOrAfterTheVerb) {
  const ProcessResult after = Jitctl({"stats", "--json"});
  ASSERT_EQ(after.exit_code, 0) << after.output;
  ExpectNumber(Parse(after), "entries");
  const ProcessResult timeout_after = Jitctl({"ls", "--timeout", "5s", "--json"});
  ASSERT_EQ(timeout_after.exit_code, 0) << timeout_after.output;
  ExpectNumber(Parse(timeout_after), "total");
}

TEST_F(JitctlCli, AMistypedVerbOrOptionGetsDidYouMean) {
  const ProcessResult verb = Jitctl({"stat"});
  EXPECT_EQ(verb.exit_code, 2);
  EXPECT_THAT(verb.output, HasSubstr("unknown verb 'stat'; did you mean stats"));
  EXPECT_THAT(verb.output, HasSubstr("verbs: get, kernels, warm, ls, stats, evict, verify, health"));
  const ProcessResult option = Jitctl({"stats", "--jsn"});
  EXPECT_EQ(option.exit_code, 2);
  EXPECT_THAT(option.output, HasSubstr("unknown option --jsn; did you mean --json?"));
  const ProcessResult verb_option = Jitctl({"evict", "--dryrun", "--kernel", "x"});
  EXPECT_EQ(verb_option.exit_code, 2);
  EXPECT_THAT(verb_option.output, HasSubstr("did you mean --dry-run?"));
}

TEST_F(JitctlCli, AnOutputPathThatCannotBeWrittenIsALocalErrorNotTheDaemons) {
  const ProcessResult to_dir = Jitctl({"get", "small.fill", "-p", "dtype=fp32", "-o", dir_.path().string()});
  EXPECT_EQ(to_dir.exit_code, 2) << to_dir.output;
  EXPECT_THAT(to_dir.output, HasSubstr("is a directory; name the file to write"));
  const std::string missing = (dir_ / "no/such/dir/k.cubin").string();
  const ProcessResult unwritable = Jitctl({"get", "small.fill", "-p", "dtype=fp32", "-o", missing});
  EXPECT_EQ(unwritable.exit_code, 1) << unwritable.output;
  EXPECT_THAT(unwritable.output, HasSubstr("the daemon answered, but the cubin cannot be written to " + missing +
                                           ": No such file or directory"));
  EXPECT_THAT(unwritable.output, ::testing::Not(HasSubstr("UNAVAILABLE")));
}

TEST_F(JitctlCli, AnArchFilterThatCannotBeAnArchIsRefusedNotSilentlyEmpty) {
  ASSERT_EQ(Jitctl({"get", "small.fill", "-p", "dtype=fp32"}).exit_code, 0);
  const ProcessResult ls = Jitctl({"ls", "--arch", "sm90"});
  EXPECT_EQ(ls.exit_code, 1);
  EXPECT_THAT(ls.output, HasSubstr("INVALID_ARGUMENT: arch 'sm90' is not of the form sm_XX, sm_XXa or sm_XXf"));
  const ProcessResult evict = Jitctl({"evict", "--arch", "sm_9", "--dry-run"});
  EXPECT_EQ(evict.exit_code, 1);
  EXPECT_THAT(evict.output, HasSubstr("arch 'sm_9' has one digit; an arch has two or three"));
  // A well-spelled arch no entry has is an empty answer, as it should be.
  const ProcessResult other = Jitctl({"--json", "ls", "--arch", "sm_100a"});
  ASSERT_EQ(other.exit_code, 0) << other.output;
  EXPECT_EQ(Field(Parse(other), "total").number_value(), 0);
}

TEST_F(JitctlCli, ATokenFileItCannotReadIsSaidInTheCliTermsNotAsNotFoundOrGrpcMetadata) {
  // The daemon's token beside its socket replaced by a symlink to a copy:
  // the client never reads a token through a link (one planted beside a
  // fake server's socket would hand it any file).
  const std::filesystem::path token = daemon_->socket_path().string() + ".admin-token";
  ASSERT_TRUE(std::filesystem::exists(token));
  std::filesystem::rename(token, dir_ / "token-copy");
  std::filesystem::create_symlink(dir_ / "token-copy", token);
  const ProcessResult evict = Jitctl({"evict", "--kernel", "small.*"});
  EXPECT_EQ(evict.exit_code, 1) << evict.output;
  EXPECT_THAT(evict.output, HasSubstr("PERMISSION_DENIED: Evict needs the daemon's admin token, and jitctl has "
                                      "none: cannot read admin token file " +
                                      token.string() + ": Too many levels of symbolic links (it is a symlink"));
  EXPECT_THAT(evict.output, HasSubstr("Run jitctl as the user the daemon runs as, or give the token's file with "
                                      "--admin-token-file FILE (this daemon's token is in " +
                                      token.string() + ", readable by the daemon's user only"));
  EXPECT_THAT(evict.output, ::testing::Not(HasSubstr("NOT_FOUND")));
  EXPECT_THAT(evict.output, ::testing::Not(HasSubstr("authorization")));
  EXPECT_THAT(evict.output, ::testing::Not(HasSubstr("Bearer")));
  // --dry-run is read-only and needs no token.
  EXPECT_EQ(Jitctl({"evict", "--kernel", "small.*", "--dry-run"}).exit_code, 0);
  // The same file named with --admin-token-file works (a link given on
  // purpose is followed).
  EXPECT_EQ(Jitctl({"--admin-token-file", token.string(), "evict", "--kernel", "small.*"}).exit_code, 0);
  // A file that is not there is NOT_FOUND, a usage error of jitctl's.
  const ProcessResult missing = Jitctl({"--admin-token-file", (dir_ / "nope").string(), "evict", "--kernel", "x"});
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_THAT(missing.output,
              HasSubstr("cannot read admin token file " + (dir_ / "nope").string() + ": No such file or directory"));
}

TEST_F(JitctlCli, EntriesThatDifferOnlyInOptionsAreDifferentRowsInLsAndItsJson) {
  for (const std::vector<std::string>& options :
       std::vector<std::vector<std::string>>{{}, {"-DTILE=4"}, {"-DTILE=8", "-lineinfo"}}) {
    std::vector<std::string> args = {"get", "small.fill", "-p", "dtype=fp32"};
    for (const std::string& option : options) args.insert(args.end(), {"--option", option});
    const ProcessResult get = Jitctl(args);
    ASSERT_EQ(get.exit_code, 0) << get.output;
    EXPECT_THAT(get.output, ::testing::ContainsRegex("\ncubin +[0-9.]+ KiB"));  // the cubin, not the blob
  }
  const ProcessResult ls = Jitctl({"ls"});
  ASSERT_EQ(ls.exit_code, 0) << ls.output;
  EXPECT_THAT(ls.output, ::testing::ContainsRegex("KEY +KERNEL +PARAMS +OPTIONS +ARCH +BLOB +HITS"));
  EXPECT_THAT(ls.output, ::testing::ContainsRegex("small.fill +dtype=fp32 +-DTILE=4 +sm_90"));
  EXPECT_THAT(ls.output, ::testing::ContainsRegex("small.fill +dtype=fp32 +--generate-line-info -DTILE=8 +sm_90"));
  EXPECT_THAT(ls.output, ::testing::ContainsRegex("small.fill +dtype=fp32 +sm_90"));
  EXPECT_THAT(ls.output, HasSubstr("3 of 3 entries"));
  EXPECT_THAT(ls.output, HasSubstr("in blob files"));

  const Value json = Parse(Jitctl({"--json", "ls"}));
  std::multiset<std::string> seen;
  for (const Value& entry : Field(json, "entries").list_value().values()) {
    const Value& options = Field(entry, "options");
    ASSERT_EQ(options.kind_case(), Value::kListValue) << entry.ShortDebugString();
    std::vector<std::string> words;
    for (const Value& option : options.list_value().values()) words.push_back(option.string_value());
    seen.insert(::testing::PrintToString(words));
  }
  EXPECT_EQ(seen, (std::multiset<std::string>{
                      ::testing::PrintToString(std::vector<std::string>{}),
                      ::testing::PrintToString(std::vector<std::string>{"-DTILE=4"}),
                      ::testing::PrintToString(std::vector<std::string>{"--generate-line-info", "-DTILE=8"})}));
  // Without options anywhere, ls keeps its narrower table.
  ASSERT_EQ(Jitctl({"evict", "--kernel", "small.*", "--include-pinned"}).exit_code, 0);
  ASSERT_EQ(Jitctl({"get", "small.fill", "-p", "dtype=fp64"}).exit_code, 0);
  EXPECT_THAT(Jitctl({"ls"}).output, ::testing::ContainsRegex("KEY +KERNEL +PARAMS +ARCH +BLOB"));
}

TEST_F(JitctlCli, AllAndManifestTogetherAreRefusedSayingWhy) {
  const std::filesystem::path spec = dir_ / "warm.toml";
  std::ofstream(spec) << "[[spec]]\nkernel = \"small.fill\"\n";
  const ProcessResult both = Jitctl({"warm", "--all", "--manifest", spec.string()});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.output, HasSubstr("--all and --manifest exclude each other"));
  const ProcessResult offline = testing::RunProcess(
      {testing::JitdBinary(), "warm", "--cache-dir", (dir_ / "c").string(), "--all", "--manifest", spec.string()},
      dir_ / "warm.log", std::chrono::seconds(20));
  EXPECT_EQ(offline.exit_code, 2);
  EXPECT_THAT(offline.output, HasSubstr("--all, --manifest and --lock exclude each other"));
}

TEST(Help, EveryScreenIsFreeOfParserArtefactsAndServeHelpListsTheServeOptions) {
  TempDir dir;
  std::vector<std::vector<std::string>> screens = {{testing::JitdBinary(), "--help"},
                                                   {testing::JitdBinary(), "serve", "--help"},
                                                   {testing::JitdBinary(), "warm", "--help"},
                                                   {testing::JitdBinary(), "lint", "--help"},
                                                   {testing::JitctlBinary(), "--help"}};
  for (const char* verb : {"get", "kernels", "warm", "ls", "stats", "evict", "verify", "health"}) {
    screens.push_back({testing::JitctlBinary(), verb, "--help"});
  }
  for (const auto& argv : screens) {
    const ProcessResult help = testing::RunProcess(argv, dir / "help.log", std::chrono::seconds(20));
    const std::string what = ::testing::PrintToString(argv);
    EXPECT_EQ(help.exit_code, 0) << what << "\n" << help.output;
    EXPECT_THAT(help.output, ::testing::Not(HasSubstr("FILE:FILE"))) << what;
    EXPECT_THAT(help.output, ::testing::Not(HasSubstr("Excludes:"))) << what;
    EXPECT_THAT(help.output, ::testing::Not(HasSubstr(":{"))) << what;
    EXPECT_THAT(help.output, ::testing::Not(::testing::ContainsRegex("[A-Z]=[0-9]"))) << what << "\n" << help.output;
    EXPECT_THAT(help.output, ::testing::Not(::testing::ContainsRegex(" (TEXT|UINT|INT)( |$)"))) << what << "\n"
                                                                                                << help.output;
  }
  const ProcessResult serve =
      testing::RunProcess({testing::JitdBinary(), "serve", "--help"}, dir / "help.log", std::chrono::seconds(20));
  EXPECT_THAT(serve.output, HasSubstr("--listen ADDR"));
  EXPECT_THAT(serve.output, HasSubstr("--max-cache-bytes N"));
  const ProcessResult warm =
      testing::RunProcess({testing::JitdBinary(), "warm", "--help"}, dir / "help.log", std::chrono::seconds(20));
  EXPECT_THAT(warm.output, HasSubstr("--kernels [NAME=]DIR"));
  EXPECT_THAT(warm.output, ::testing::ContainsRegex("Kernel tree \\(sources and kernels.toml\\).*\\(default: /"));
}

}  // namespace
}  // namespace jitd
