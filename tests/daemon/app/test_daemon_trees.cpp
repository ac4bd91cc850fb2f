// Several kernel trees in one daemon (`--kernels NAME=DIR`, repeatable):
// names qualified by tree, bare names while unambiguous, keys that are what
// was compiled (the tree's name is not in them), each tree guarded under its own namespace rule, refused and
// reloaded on its own, and locked on its own (`--lock FILE`). A tree that
// cannot be read safely (a link out of it or in a loop, a file over the
// bounds, a manifest option that reads files) is refused alone, at start
// and on SIGHUP, and never takes the daemon down.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "grpc/health/v1/health.grpc.pb.h"
#include "jitd/v1/compiler.grpc.pb.h"
#include "jitd/v1/error_details.pb.h"
#include "kernel_fixtures.h"
#include "poll_until.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using ::testing::HasSubstr;
using testing::KernelRequest;
using testing::kProcessTimeout;
using testing::PollUntil;
using testing::TempDir;
using testing::TestDaemon;
using testing::WriteFile;

std::filesystem::path TeamKernelsDir() { return testing::SmallKernelsDir().parent_path() / "kernels_team"; }

std::string ReadFile(const std::filesystem::path& file) {
  std::ifstream stream(file);
  std::stringstream content;
  content << stream.rdbuf();
  return content.str();
}

size_t Count(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++count;
  return count;
}

// A sparse file of `bytes`: as large as a stat says, costing no disk.
void SparseFile(const std::filesystem::path& file, off_t bytes) {
  std::filesystem::create_directories(file.parent_path());
  const int fd = ::open(file.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << file;
  ASSERT_EQ(::ftruncate(fd, bytes), 0);
  ::close(fd);
}

// The most memory `pid` ever held (VmHWM), in MiB.
size_t PeakMiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) / 1024;
  }
  ADD_FAILURE() << "no VmHWM for " << pid;
  return 0;
}

const v1::KernelTreeInfo* Tree(const v1::StatsResponse& stats, const std::string& name) {
  for (const v1::KernelTreeInfo& tree : stats.trees()) {
    if (tree.name() == name) return &tree;
  }
  return nullptr;
}

// A daemon serving private copies of two trees: "small" (namespace sglang)
// and "team" (namespace team), which a test may edit or break first.
class TreesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::CopyTree(testing::SmallKernelsDir(), small_);
    testing::CopyTree(TeamKernelsDir(), team_);
  }

  void Start(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--kernels", "small=" + small_.string(), "--kernels", "team=" + team_.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    daemon_ = std::make_unique<TestDaemon>(dir_, args);
    ASSERT_TRUE(daemon_->WaitUntilServing().ok()) << daemon_->process().Output();
    client_ = daemon_->Connect("", std::chrono::seconds(120));
  }

  absl::StatusOr<v1::GetKernelResponse> Get(const std::string& kernel,
                                            const std::map<std::string, std::string>& params = {}) {
    return client_->GetKernel(KernelRequest(kernel, params));
  }

  // SIGHUP, then waits for `expected` to have been logged `occurrence` times.
  void Reload(const std::string& expected, size_t occurrence = 1) {
    daemon_->process().Signal(SIGHUP);
    ASSERT_TRUE(PollUntil([&] { return Count(daemon_->process().Output(), expected) >= occurrence; }, kProcessTimeout))
        << daemon_->process().Output();
  }

  TempDir dir_;
  const std::filesystem::path small_ = dir_ / "small";
  const std::filesystem::path team_ = dir_ / "team";
  std::unique_ptr<TestDaemon> daemon_;
  std::unique_ptr<Client> client_;
};

TEST_F(TreesTest, TwoTreesAreServedAtOnceUnderQualifiedNamesWithKeysOfTheirSources) {
  Start();
  absl::StatusOr<v1::GetKernelResponse> ours = Get("small/small.scale");
  absl::StatusOr<v1::GetKernelResponse> theirs = Get("team/small.scale");
  ASSERT_TRUE(ours.ok()) << ours.status();
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  EXPECT_NE(ours->key(), theirs->key());
  ASSERT_EQ(theirs->symbols_size(), 1);
  EXPECT_EQ(theirs->symbols(0).name_expression(), "team::scale_kernel");

  // A bare name one tree has works; one both trees have names both.
  absl::StatusOr<v1::GetKernelResponse> axpy = Get("team.axpy", {{"dtype", "fp32"}});
  ASSERT_TRUE(axpy.ok()) << axpy.status();
  EXPECT_EQ(Get("team/team.axpy", {{"dtype", "fp32"}})->key(), axpy->key());
  absl::StatusOr<v1::GetKernelResponse> ambiguous = Get("small.scale");
  EXPECT_EQ(ambiguous.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ambiguous.status().message()), HasSubstr("small/small.scale or team/small.scale"));
  absl::StatusOr<v1::GetKernelResponse> unknown_tree = Get("other/small.scale");
  EXPECT_EQ(unknown_tree.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(unknown_tree.status().message()), HasSubstr("no kernel tree 'other' is served"));

  // Listed, stored and counted by tree.
  absl::StatusOr<v1::ListKernelsResponse> listed = client_->ListKernels({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::map<std::string, std::string> tree_of;
  for (const v1::KernelInfo& kernel : listed->kernels()) tree_of[kernel.name()] = kernel.tree();
  EXPECT_EQ(tree_of["small/small.fill"], "small");
  EXPECT_EQ(tree_of["team/team.axpy"], "team");
  EXPECT_EQ(tree_of.size(), 6u);
  absl::StatusOr<v1::ListEntriesResponse> entries = client_->ListEntries({});
  ASSERT_TRUE(entries.ok()) << entries.status();
  std::set<std::string> kernels;
  for (const v1::EntryInfo& entry : entries->entries()) kernels.insert(entry.kernel());
  EXPECT_EQ(kernels, (std::set<std::string>{"small/small.scale", "team/small.scale", "team/team.axpy"}));
  const v1::StatsResponse stats = daemon_->Stats();
  ASSERT_EQ(stats.trees_size(), 2);
  EXPECT_TRUE(Tree(stats, "team")->serving());
  EXPECT_EQ(Tree(stats, "team")->kernel_namespace(), "team");
  EXPECT_EQ(Tree(stats, "small")->kernel_namespace(), "sglang");
  EXPECT_EQ(Tree(stats, "team")->kernels(), 2u);

  // jitctl says it by tree too.
  const auto ls = daemon_->Jitctl({"ls", "--tree", "team"});
  EXPECT_EQ(ls.exit_code, 0) << ls.output;
  EXPECT_THAT(ls.output, HasSubstr("team/small.scale"));
  EXPECT_THAT(ls.output, ::testing::Not(HasSubstr("small/small.scale")));
  EXPECT_THAT(ls.output, HasSubstr("2 of 2 entries"));
  const auto kernels_listed = daemon_->Jitctl({"kernels"});
  EXPECT_THAT(kernels_listed.output, HasSubstr("6 kernels (small 4, team 2)"));
  const auto stats_shown = daemon_->Jitctl({"stats"});
  EXPECT_THAT(stats_shown.output, ::testing::ContainsRegex("tree team +2 from .*team \\(namespace team, fingerprint"));
}

// What a user did (issue 35): the cache warmed with the shipped tree served
// unnamed, then that tree served by name beside a second one. A key is what
// was compiled, and the serving name compiles nothing: every warmed entry is
// current and answers CACHED_ONLY, nothing compiles again.
TEST_F(TreesTest, EntriesWarmedWithTheUnnamedTreeAreHitsWhenItIsServedNamedBesideAnother) {
  daemon_ = std::make_unique<TestDaemon>(dir_, std::vector<std::string>{"--kernels", small_.string()});
  ASSERT_TRUE(daemon_->WaitUntilServing().ok()) << daemon_->process().Output();
  client_ = daemon_->Connect("", std::chrono::seconds(120));
  absl::StatusOr<v1::GetKernelResponse> scale = Get("small.scale");
  absl::StatusOr<v1::GetKernelResponse> fill = Get("small.fill", {{"dtype", "fp32"}});
  ASSERT_TRUE(scale.ok() && fill.ok()) << scale.status() << fill.status();
  client_.reset();
  daemon_.reset();

  Start();
  for (const auto& [name, params, key] :
       {std::tuple<std::string, std::map<std::string, std::string>, std::string>{"small/small.scale", {}, scale->key()},
        {"small/small.fill", {{"dtype", "fp32"}}, fill->key()}}) {
    absl::StatusOr<v1::GetKernelResponse> hit =
        client_->GetKernel(KernelRequest(name, params, v1::GetKernelRequest::CACHED_ONLY));
    ASSERT_TRUE(hit.ok()) << name << ": " << hit.status();
    EXPECT_EQ(hit->key(), key) << name;
  }
  const v1::StatsResponse stats = daemon_->Stats();
  EXPECT_EQ(stats.compiles(), 0u);
  EXPECT_EQ(stats.rewarm().current_entries(), 2u);
  EXPECT_EQ(stats.rewarm().older_entries(), 0u);
}

TEST_F(TreesTest, ATreeThatFailsItsNamespaceRuleIsRefusedAloneAtStart) {
  // team's kernel written in sglang: right for the small tree, wrong for team.
  std::string source = ReadFile(team_ / "scale.cu");
  source.replace(source.find("namespace team {"), 16, "namespace sglang {");
  WriteFile(team_ / "scale.cu", source);
  Start();
  EXPECT_THAT(daemon_->process().Output(), HasSubstr("namespace guard: [tree team] scale.cu:1:"));
  EXPECT_TRUE(Get("small/small.scale").ok());
  EXPECT_TRUE(Get("small.scale").ok()) << "the only tree served that has it";
  absl::StatusOr<v1::GetKernelResponse> refused = Get("team/team.axpy", {{"dtype", "fp32"}});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kNotFound);
  // The answer says the tree was refused, and why; and so does the wire, in
  // a word a program can match.
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("kernel tree 'team'"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("was refused when it was loaded"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("namespace team"));
  auto channel = grpc::CreateChannel(daemon_->endpoint(), grpc::InsecureChannelCredentials());
  {
    grpc::ClientContext context;
    v1::GetKernelResponse response;
    grpc::Status raw = v1::Compiler::NewStub(channel)->GetKernel(
        &context, KernelRequest("team/team.axpy", {{"dtype", "fp32"}}), &response);
    v1::RpcStatus details;
    ASSERT_TRUE(details.ParseFromString(raw.error_details())) << raw.error_message();
    ASSERT_EQ(details.details_size(), 1);
    EXPECT_EQ(details.details(0).type_url(), "type.googleapis.com/google.rpc.ErrorInfo");
    v1::ErrorInfo info;
    ASSERT_TRUE(info.ParseFromString(details.details(0).value()));
    EXPECT_EQ(info.reason(), "TREE_REFUSED");
    EXPECT_EQ(details.code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
  }
  // A bare name no served tree has names the refused tree too.
  EXPECT_THAT(std::string(Get("team.axpy", {{"dtype", "fp32"}}).status().message()),
              HasSubstr("kernel tree(s) refused when loaded, whose kernels are not served: team ("));
  // Degraded, where a probe sees it: the log, health per tree, Stats.
  ASSERT_TRUE(daemon_->WaitUntilLoggedReady().ok());
  EXPECT_THAT(daemon_->process().Output(), HasSubstr("jitd ready, degraded:"));
  auto health = grpc::health::v1::Health::NewStub(channel);
  const auto check = [&](const std::string& service) {
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    grpc::Status status = health->Check(&context, request, &response);
    return status.ok() ? grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status())
                       : "error " + std::to_string(status.error_code());
  };
  EXPECT_EQ(check(""), "SERVING") << "the other tree answers";
  EXPECT_EQ(check("jitd.tree.small"), "SERVING");
  EXPECT_EQ(check("jitd.tree.team"), "NOT_SERVING");
  const v1::StatsResponse stats = daemon_->Stats();
  ASSERT_NE(Tree(stats, "team"), nullptr);
  EXPECT_FALSE(Tree(stats, "team")->serving());
  EXPECT_THAT(Tree(stats, "team")->error(), HasSubstr("namespace team"));
  EXPECT_TRUE(Tree(stats, "small")->serving());
}

TEST_F(TreesTest, EachTreeReloadsOnItsOwnAndABrokenOneKeepsItsOldKernels) {
  Start();
  absl::StatusOr<v1::GetKernelResponse> small_before = Get("small/small.scale");
  absl::StatusOr<v1::GetKernelResponse> team_before = Get("team/small.scale");
  ASSERT_TRUE(small_before.ok() && team_before.ok()) << small_before.status() << team_before.status();

  // An edit of team's kernel: team's key changes, small's does not.
  WriteFile(team_ / "scale.cu", ReadFile(team_ / "scale.cu") + "// edited\n");
  Reload("reloaded kernels: small: 4 kernels");
  EXPECT_NE(Get("team/small.scale")->key(), team_before->key());
  absl::StatusOr<v1::GetKernelResponse> small_same = Get("small/small.scale");
  ASSERT_TRUE(small_same.ok()) << small_same.status();
  EXPECT_EQ(small_same->key(), small_before->key());
  EXPECT_EQ(small_same->source(), v1::GetKernelResponse::MEMORY);

  // small breaks while team changes again: team's change is taken, small
  // keeps serving what it served.
  WriteFile(small_ / "scale.cu", "namespace {\n__global__ void helper() {}\n}\n" + ReadFile(small_ / "scale.cu"));
  WriteFile(team_ / "axpy.cu", ReadFile(team_ / "axpy.cu") + "// edited too\n");
  absl::StatusOr<v1::GetKernelResponse> axpy_before = Get("team/team.axpy", {{"dtype", "fp32"}});
  ASSERT_TRUE(axpy_before.ok()) << axpy_before.status();
  Reload("kernel reload failed: 1 kernel tree(s) refused");
  EXPECT_THAT(daemon_->process().Output(), HasSubstr("still serving the previous kernels"));
  EXPECT_EQ(Get("small/small.scale")->key(), small_before->key());
  EXPECT_NE(Get("team/team.axpy", {{"dtype", "fp32"}})->key(), axpy_before->key());
  const v1::StatsResponse stats = daemon_->Stats();
  EXPECT_TRUE(Tree(stats, "small")->serving());
  EXPECT_EQ(Tree(stats, "small")->refused_reloads(), 1u);
  EXPECT_THAT(Tree(stats, "small")->error(), HasSubstr("namespace guard"));
  EXPECT_EQ(Tree(stats, "team")->error(), "");
}

TEST_F(TreesTest, ALockedTreeServesExactlyItsLockAndTheOtherTreesEverything) {
  Start();
  absl::StatusOr<v1::GetKernelResponse> locked = Get("team/team.axpy", {{"dtype", "fp32"}});
  ASSERT_TRUE(locked.ok()) << locked.status();
  daemon_.reset();
  const std::filesystem::path lock = dir_ / "team.lock";
  WriteFile(lock,
            "schema = 1\ntree = \"team\"\n[[instantiation]]\nkernel = \"team.axpy\"\nparams = \"dtype=fp32\"\n"
            "arch = \"sm_90\"\nkey = \"" +
                locked->key() + "\"\n");
  Start({"--lock", lock.string()});

  EXPECT_TRUE(Get("team/team.axpy", {{"dtype", "fp32"}}).ok());
  absl::StatusOr<v1::GetKernelResponse> outside = Get("team/team.axpy", {{"dtype", "fp64"}});
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(outside.status().message()), HasSubstr("is not in " + lock.string()));
  EXPECT_EQ(Get("team/small.scale").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Get("small/small.scale").ok()) << "the small tree is not locked";
  const v1::StatsResponse stats = daemon_->Stats();
  EXPECT_EQ(Tree(stats, "team")->lock(), lock.string());
  EXPECT_EQ(Tree(stats, "team")->locked_instantiations(), 1u);

  // The sources change under the lock: the locked instantiation's key is
  // not the locked one any more, and it is refused, not served.
  WriteFile(team_ / "axpy.cu", ReadFile(team_ / "axpy.cu") + "// not what was locked\n");
  Reload("reloaded kernels");
  absl::StatusOr<v1::GetKernelResponse> changed = Get("team/team.axpy", {{"dtype", "fp32"}});
  EXPECT_EQ(changed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(changed.status().message()), HasSubstr("is locked with key"));
}

TEST_F(TreesTest, ALockForATreeNotServedStopsTheStartSayingSo) {
  const std::filesystem::path lock = dir_ / "other.lock";
  WriteFile(lock, "schema = 1\ntree = \"other\"\n");
  std::vector<std::string> args = TestDaemon::DefaultArgs(dir_);
  args.insert(args.end(), {"--kernels", "small=" + small_.string(), "--lock", lock.string()});
  const auto result = testing::RunProcess(args, dir_ / "refused.log", kProcessTimeout);
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output, HasSubstr("is the lock of kernel tree 'other', which is not served"));
}

TEST_F(TreesTest, SeveralTreesMustEachBeNamed) {
  std::vector<std::string> args = TestDaemon::DefaultArgs(dir_);
  args.insert(args.end(), {"--kernels", small_.string(), "--kernels", "team=" + team_.string()});
  const auto result = testing::RunProcess(args, dir_ / "refused.log", kProcessTimeout);
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("name each, NAME=DIR"));
}

TEST_F(TreesTest, AManifestOptionThatReadsFilesIsRefusedByTheDaemonAndByLint) {
  std::string manifest = ReadFile(team_ / "kernels.toml");
  const std::string defaults = "options = [\"-std=c++17\"]";
  manifest.replace(manifest.find(defaults), defaults.size(), "options = [\"-std=c++17\", \"-I/ext\"]");
  WriteFile(team_ / "kernels.toml", manifest);
  Start();
  EXPECT_TRUE(Get("small/small.scale").ok());
  EXPECT_EQ(Get("team/small.scale").status().code(), absl::StatusCode::kNotFound);
  const v1::StatsResponse stats = daemon_->Stats();
  ASSERT_NE(Tree(stats, "team"), nullptr);
  EXPECT_FALSE(Tree(stats, "team")->serving());
  EXPECT_THAT(Tree(stats, "team")->error(),
              HasSubstr((team_ / "kernels.toml").string() + ":8: option '-I/ext' in [defaults] is not allowed"));
  EXPECT_THAT(Tree(stats, "team")->error(), HasSubstr("put the headers in the tree"));

  // A kernel's own options, an include path spelled apart from its value.
  manifest = ReadFile(team_ / "kernels.toml");
  manifest.replace(manifest.find("\"-I/ext\""), 8, "\"-DX=1\"");
  manifest.replace(manifest.find("name_expressions = [\"team::scale_kernel\"]"), 0,
                   "options = [\"--include-path\", \"/ext\"]\n");
  WriteFile(team_ / "kernels.toml", manifest);
  const auto lint =
      testing::RunProcess({testing::JitdBinary(), "lint", "--kernels", "team=" + team_.string(), "--source-only"},
                          dir_ / "lint.log", kProcessTimeout);
  EXPECT_NE(lint.exit_code, 0) << lint.output;
  EXPECT_THAT(lint.output, HasSubstr("option '--include-path' in kernel small.scale is not allowed"));
  EXPECT_THAT(lint.output, HasSubstr("a compile reads only the kernel tree's bytes"));

  // And a request may not give one either.
  for (const std::string option : {"-I/ext", "--include-path=/ext", "-include", "--pre-include=x.h"}) {
    v1::GetKernelRequest request = KernelRequest("small/small.scale");
    request.add_options(option);
    absl::StatusOr<v1::GetKernelResponse> refused = client_->GetKernel(request);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << option;
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr("option '" + option + "' is not allowed"));
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr("put the headers in the tree"));
  }
}

TEST_F(TreesTest, ALinkOutOfATreeIsRefusedAndWhatItPointsAtIsNeverAnswered) {
  const std::filesystem::path secret = dir_ / "secret";
  WriteFile(secret, "SECRET-CONTENT-42\n");
  std::filesystem::permissions(secret, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::filesystem::create_symlink(secret, team_ / "config.inc");
  WriteFile(team_ / "scale.cu", "#include \"config.inc\"\n" + ReadFile(team_ / "scale.cu"));
  Start();
  EXPECT_TRUE(Get("small/small.scale").ok());
  absl::StatusOr<v1::GetKernelResponse> refused = Get("team/small.scale");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kNotFound);
  const v1::StatsResponse stats = daemon_->Stats();
  ASSERT_NE(Tree(stats, "team"), nullptr);
  EXPECT_THAT(Tree(stats, "team")->error(),
              HasSubstr("config.inc in " + std::filesystem::canonical(team_).string() + " is a symbolic link to " +
                        std::filesystem::canonical(secret).string() + ", outside the kernel tree"));
  // Whatever a client can see: answers, listings, stats, and the log.
  absl::StatusOr<v1::ListKernelsResponse> listed = client_->ListKernels({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  for (const std::string& seen :
       {std::string(refused.status().message()), stats.DebugString(), listed->DebugString(),
        daemon_->Jitctl({"stats"}).output, daemon_->Jitctl({"kernels"}).output, daemon_->process().Output()}) {
    EXPECT_THAT(seen, ::testing::Not(HasSubstr("SECRET-CONTENT-42")));
  }
}

TEST_F(TreesTest, AnIncludeOfAFileOutsideTheTreeIsRefusedAndItsContentNeverShown) {
  const std::filesystem::path secret = dir_ / "secret.h";
  WriteFile(secret, "SECRET_CONTENT_42 oops;\n");
  WriteFile(team_ / "scale.cu", "#include \"" + secret.string() + "\"\n" + ReadFile(team_ / "scale.cu"));
  const auto lint = testing::RunProcess({testing::JitdBinary(), "lint", "--kernels", "team=" + team_.string()},
                                        dir_ / "lint.log", kProcessTimeout);
  EXPECT_NE(lint.exit_code, 0) << lint.output;
  EXPECT_THAT(lint.output, HasSubstr("scale.cu:1 in " + std::filesystem::canonical(team_).string() + ": #include \"" +
                                     secret.string() + "\" names a file outside the kernel tree"));
  EXPECT_THAT(lint.output, ::testing::Not(HasSubstr("SECRET_CONTENT_42")));
  Start();
  EXPECT_TRUE(Get("small/small.scale").ok());
  EXPECT_EQ(Get("team/small.scale").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Tree(daemon_->Stats(), "team")->error(), HasSubstr("names a file outside the kernel tree"));
  EXPECT_THAT(daemon_->process().Output(), ::testing::Not(HasSubstr("SECRET_CONTENT_42")));
}

TEST_F(TreesTest, AnIncludeIsNeverLookedUpInTheWorkingDirectory) {
  // NVRTC looks an #include up beside the program's name too, and the
  // name is relative: without --no-source-include the compile read this
  // file from the working directory and its error quoted it.
  WriteFile(dir_ / "cwd_secret.h", "SECRET_CONTENT_43 oops;\n");
  WriteFile(team_ / "scale.cu", "#include \"cwd_secret.h\"\n" + ReadFile(team_ / "scale.cu"));
  const auto lint = testing::RunProcess({"/bin/sh", "-c",
                                         "cd '" + dir_.path().string() + "' && exec '" + testing::JitdBinary() +
                                             "' lint --kernels team=" + team_.string()},
                                        dir_ / "lint.log", kProcessTimeout);
  EXPECT_NE(lint.exit_code, 0) << lint.output;
  EXPECT_THAT(lint.output, HasSubstr("cannot open source file \"cwd_secret.h\""));
  EXPECT_THAT(lint.output, ::testing::Not(HasSubstr("SECRET_CONTENT_43")));
}

TEST_F(TreesTest, ALinkLoopOrAnUnfollowableLinkRefusesItsTreeAloneAtStartAndOnReload) {
  std::filesystem::create_symlink("loop.cuh", team_ / "loop.cuh");
  Start();
  EXPECT_TRUE(Get("small/small.scale").ok());
  EXPECT_EQ(Get("team/small.scale").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Tree(daemon_->Stats(), "team")->error(), HasSubstr("loop.cuh in "));
  EXPECT_THAT(Tree(daemon_->Stats(), "team")->error(),
              HasSubstr("is a symbolic link (to loop.cuh) that cannot be followed"));

  // On SIGHUP the other tree breaks too, by a link whose target cannot be
  // resolved: both refused, the daemon up and serving what it served.
  std::filesystem::create_symlink(std::string(300, 'x'), small_ / "long.cuh");
  Reload("kernel reload failed: 2 kernel tree(s) refused");
  EXPECT_FALSE(daemon_->process().Exited()) << daemon_->process().Output();
  EXPECT_TRUE(Get("small/small.scale").ok());
  EXPECT_THAT(Tree(daemon_->Stats(), "small")->error(), HasSubstr("long.cuh in "));

  std::filesystem::remove(small_ / "long.cuh");
  std::filesystem::remove(team_ / "loop.cuh");
  Reload("reloaded kernels");
  EXPECT_TRUE(Get("team/small.scale").ok());
}

TEST_F(TreesTest, ADaemonWhoseOnlyTreeLoopsExitsSayingSoAndLeavesNoAdminToken) {
  std::filesystem::create_symlink("loop.cuh", small_ / "loop.cuh");
  std::vector<std::string> args = TestDaemon::DefaultArgs(dir_);
  args.insert(args.end(), {"--kernels", small_.string()});
  const auto result = testing::RunProcess(args, dir_ / "refused.log", kProcessTimeout);
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output, HasSubstr("loop.cuh in "));
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir_.path())) {
    EXPECT_FALSE(entry.path().string().ends_with(".admin-token")) << entry.path();
  }
}

TEST_F(TreesTest, ALargeFileNoKernelReachesIsNeverReadAndAHeaderOverTheBoundRefusesItsTree) {
  constexpr size_t kPeakBoundMiB = 1024;  // the file is 2 GiB: read once, the peak would be above it
  SparseFile(small_ / "data" / "weights.bin", off_t{2} << 30);
  Start();
  EXPECT_TRUE(Get("small/small.scale").ok());
  EXPECT_LT(PeakMiB(daemon_->process().pid()), kPeakBoundMiB);
  Reload("reloaded kernels");
  EXPECT_LT(PeakMiB(daemon_->process().pid()), kPeakBoundMiB);

  // A header is read whatever its size, so its size is checked first.
  SparseFile(team_ / "big.cuh", off_t{2} << 30);
  Reload("kernel reload failed");
  EXPECT_THAT(Tree(daemon_->Stats(), "team")->error(),
              HasSubstr("big.cuh in " + std::filesystem::canonical(team_).string() +
                        " is 2147483648 bytes; a file a kernel tree's compiles can read may hold at most 16 MiB"));
  EXPECT_TRUE(Get("team/small.scale").ok()) << "the previous kernels are still served";
  EXPECT_LT(PeakMiB(daemon_->process().pid()), kPeakBoundMiB);
}

TEST_F(TreesTest, TwoLocksForOneTreeStopTheStartNamingBoth) {
  const std::filesystem::path first = dir_ / "first.lock";
  const std::filesystem::path second = dir_ / "second.lock";
  WriteFile(first, "schema = 1\ntree = \"team\"\n");
  WriteFile(second, "schema = 1\ntree = \"team\"\n");
  std::vector<std::string> args = TestDaemon::DefaultArgs(dir_);
  args.insert(args.end(), {"--kernels", "small=" + small_.string(), "--kernels", "team=" + team_.string(), "--lock",
                           first.string(), "--lock", second.string()});
  const auto result = testing::RunProcess(args, dir_ / "refused.log", kProcessTimeout);
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output, HasSubstr("--lock " + first.string() + " and --lock " + second.string() +
                                       " are both locks of the kernel tree team (" + team_.string() + ")"));

  // jitd warm refuses them the same way.
  const auto warm =
      testing::RunProcess({testing::JitdBinary(), "warm", "--cache-dir", (dir_ / "warm").string(), "--kernels",
                           "team=" + team_.string(), "--lock", first.string(), "--lock", second.string()},
                          dir_ / "warm.log", kProcessTimeout);
  EXPECT_EQ(warm.exit_code, 2) << warm.output;
  EXPECT_THAT(warm.output, HasSubstr("are both locks of the kernel tree team"));
}

// `jitd warm --config FILE` warms what the daemon of that config serves:
// its trees (named), its lock, in one command; the daemon started on the
// same config then answers every warmed instantiation from the cache.
TEST_F(TreesTest, AnOfflineWarmOfTheDaemonsConfigIsExactlyWhatItServes) {
  Start();
  absl::StatusOr<v1::GetKernelResponse> locked = Get("team/team.axpy", {{"dtype", "fp32"}});
  ASSERT_TRUE(locked.ok()) << locked.status();
  daemon_.reset();
  // Another directory: the daemon there starts on what the warm-ups wrote.
  TempDir served;
  const std::filesystem::path lock = dir_ / "team.lock", config = dir_ / "jitd.toml", cache = served / "cache";
  WriteFile(lock,
            "schema = 1\ntree = \"team\"\n[[instantiation]]\nkernel = \"team.axpy\"\nparams = \"dtype=fp32\"\n"
            "arch = \"sm_90\"\nkey = \"" +
                locked->key() + "\"\n");
  WriteFile(config, "kernels = [\"small=" + small_.string() + "\", \"team=" + team_.string() + "\"]\nlock = \"" +
                        lock.string() + "\"\narch = \"sm_90\"\n");
  WriteFile(dir_ / "list.toml",
            "[[spec]]\nkernel = \"small/small.fill\"\nparams = { dtype = \"fp64\" }\n"
            "[[spec]]\nkernel = \"team/team.axpy\"\nparams = { dtype = \"fp32\" }\n");
  const auto warm = testing::RunProcess({testing::JitdBinary(), "warm", "--config", config.string(), "--cache-dir",
                                         cache.string(), "--manifest", (dir_ / "list.toml").string()},
                                        dir_ / "warm.log", kProcessTimeout);
  ASSERT_EQ(warm.exit_code, 0) << warm.output;
  EXPECT_THAT(warm.output, HasSubstr("2 instantiations"));
  // The lock narrows --all to what it lists: the other team instantiations
  // are not compiled (the daemon would refuse them).
  const auto all = testing::RunProcess(
      {testing::JitdBinary(), "warm", "--config", config.string(), "--cache-dir", cache.string(), "--all"},
      dir_ / "all.log", kProcessTimeout);
  EXPECT_EQ(all.exit_code, 1) << all.output;  // the small tree's small.broken fails, as it would when served
  EXPECT_THAT(all.output, HasSubstr("failed   small/small.broken"));
  EXPECT_THAT(all.output, HasSubstr("cached   team/team.axpy{dtype=fp32}"));
  EXPECT_THAT(all.output, ::testing::Not(HasSubstr("team/team.axpy{dtype=fp64}")));
  EXPECT_THAT(all.output, ::testing::Not(HasSubstr("team/small.scale")));

  daemon_ = std::make_unique<TestDaemon>(served, std::vector<std::string>{"--config", config.string()});
  ASSERT_TRUE(daemon_->WaitUntilServing().ok()) << daemon_->process().Output();
  client_ = daemon_->Connect("", std::chrono::seconds(120));
  for (const auto& [name, params] : std::vector<std::pair<std::string, std::map<std::string, std::string>>>{
           {"small/small.fill", {{"dtype", "fp64"}}},
           {"team/team.axpy", {{"dtype", "fp32"}}},
           {"small/small.scale", {}}}) {
    absl::StatusOr<v1::GetKernelResponse> hit =
        client_->GetKernel(KernelRequest(name, params, v1::GetKernelRequest::CACHED_ONLY));
    EXPECT_TRUE(hit.ok()) << name << ": " << hit.status();
  }
  EXPECT_EQ(daemon_->Stats().compiles(), 0u);
  EXPECT_EQ(client_->GetKernel(KernelRequest("team/team.axpy", {{"dtype", "fp64"}})).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "outside the lock, warmed or not";
}

}  // namespace
}  // namespace jitd
