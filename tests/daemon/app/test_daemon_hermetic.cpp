// Hermetic compiles against the real daemon: what is hashed is exactly what
// NVRTC compiles. The kernels reach NVRTC from memory (no copy on disk is
// ever compiled from, and old snapshot directories are swept); a toolkit
// header changed under a running daemon never pairs an old key with new
// bytes; the NVRTC library identity is part of what the daemon reports; an
// NVRTC error names the user's kernels file; and after a toolkit change the
// most used instantiations compile again before anyone asks (rewarm).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "jitd/cache.h"
#include "kernel_fixtures.h"
#include "poll_until.h"
#include "test_daemon.h"

namespace jitd {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::KernelRequest;
using testing::kProcessTimeout;
using testing::PollUntil;
using testing::TempDir;
using testing::TestDaemon;
using testing::WriteFile;

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string ReadFile(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

// A daemon on its own copy of the small kernels (and any extra flags).
struct Served {
  Served(const TempDir& dir, const fs::path& kernels, std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), {"--kernels", kernels.string(), "--workers", "1"});
    daemon = std::make_unique<TestDaemon>(dir, extra);
    ready = daemon->WaitUntilServing();
    if (ready.ok()) client = daemon->Connect("", std::chrono::seconds(120));
  }
  absl::StatusOr<v1::GetKernelResponse> Get(const std::string& kernel, const std::map<std::string, std::string>& p) {
    return client->GetKernel(KernelRequest(kernel, p));
  }
  std::unique_ptr<TestDaemon> daemon;
  absl::Status ready;
  std::unique_ptr<Client> client;
};

TEST(Hermetic, ATamperedKernelsCopyInTheCacheDirIsNeverCompiledFromAndIsSwept) {
  // A clean daemon: the reference key and bytes.
  TempDir clean_dir;
  testing::CopyTree(testing::SmallKernelsDir(), clean_dir / "kernels");
  std::string key, cubin;
  {
    Served clean(clean_dir, clean_dir / "kernels");
    ASSERT_TRUE(clean.ready.ok()) << clean.daemon->process().Output();
    auto got = clean.Get("small.fill", {{"dtype", "fp32"}});
    ASSERT_TRUE(got.ok()) << got.status();
    key = got->key();
    cubin = got->cubin();
  }
  // A cache directory as an older jitd left it, with its kernels snapshot
  // edited by hand (and a half-written one): GlobalIndex() always 0.
  TempDir dir;
  testing::CopyTree(testing::SmallKernelsDir(), dir / "kernels");  // elsewhere: paths are not in keys
  const fs::path snapshots = dir / "cache" / "kernel-trees";
  for (const fs::path& copy :
       {snapshots / "0123456789abcdef0123456789abcdef", snapshots / ".tmp-0123456789abcdef-42"}) {
    fs::create_directories(copy.parent_path());
    testing::CopyTree(testing::SmallKernelsDir(), copy);
    const std::string index = ReadFile(copy / "include/index.cuh");
    ASSERT_NE(index.find("return"), std::string::npos);
    WriteFile(copy / "include/index.cuh", "#pragma once\n__device__ inline unsigned GlobalIndex() { return 0; }\n");
  }
  Served served(dir, dir / "kernels");
  ASSERT_TRUE(served.ready.ok()) << served.daemon->process().Output();
  auto got = served.Get("small.fill", {{"dtype", "fp32"}});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->source(), v1::GetKernelResponse::COMPILED) << "compiled here, not found in another cache";
  EXPECT_EQ(got->key(), key) << "the same kernels give the same key wherever they sit";
  EXPECT_EQ(got->cubin(), cubin) << "the tampered copy was compiled from";
  EXPECT_FALSE(fs::exists(snapshots)) << "old snapshots are swept at start";
  EXPECT_THAT(served.daemon->process().Output(), HasSubstr("old kernels snapshots"));
}

TEST(Hermetic, AnNvrtcErrorNamesTheUsersKernelsFile) {
  TempDir dir;
  testing::CopyTree(testing::SmallKernelsDir(), dir / "kernels");
  Served served(dir, dir / "kernels");
  ASSERT_TRUE(served.ready.ok()) << served.daemon->process().Output();
  auto got = served.Get("small.broken", {});
  ASSERT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition) << got.status();
  const std::string user_file = (fs::weakly_canonical(dir / "kernels") / "broken.cu").string();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr(user_file + "(3): error")) << got.status();
  EXPECT_THAT(std::string(got.status().message()), ::testing::Not(HasSubstr("kernel-trees")));
}

TEST(Hermetic, TheDaemonReportsTheNvrtcLibraryIdentityNotJustItsVersion) {
  TempDir dir;
  testing::CopyTree(testing::SmallKernelsDir(), dir / "kernels");
  Served served(dir, dir / "kernels");
  ASSERT_TRUE(served.ready.ok()) << served.daemon->process().Output();
  const std::string log = served.daemon->process().Output();
  EXPECT_THAT(log, HasSubstr("toolkit: NVRTC 13.0"));
  EXPECT_THAT(log, ::testing::ContainsRegex("nvrtc libnvrtc[^ ]*\\+libnvrtc-builtins[^ ]* [0-9a-f]{12}"));
  EXPECT_TRUE(fs::exists(served.daemon->cache_dir() / "nvrtc-fingerprint")) << "remembered for the next start";
}

// A private copy of the toolkit headers (--cuda-include) with one header of
// the test's, which the served kernel includes; the test edits it while
// the daemon runs.
class ToolkitChange : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::copy("/usr/local/cuda/include", include_, fs::copy_options::recursive);
    WriteFile(include_ / "jitd_probe.h", "#pragma once\n#define JITD_PROBE 1\n");
    testing::CopyTree(testing::SmallKernelsDir(), kernels_);
    WriteFile(kernels_ / "fill.cu", ReadFile(kernels_ / "fill.cu").insert(0, "#include <jitd_probe.h>\n"));
    std::string fill = ReadFile(kernels_ / "fill.cu");
    const std::string body = "out[i] = value;";
    ASSERT_NE(fill.find(body), std::string::npos);
    fill.replace(fill.find(body), body.size(), "out[i] = value * T(JITD_PROBE);");
    WriteFile(kernels_ / "fill.cu", fill);
  }
  TempDir dir_;
  const fs::path include_ = dir_ / "cuda-include";
  const fs::path kernels_ = dir_ / "kernels";
};

TEST_F(ToolkitChange, ANewToolkitHeaderGetsANewKeyAndTheOldKeyKeepsItsBytes) {
  Served served(dir_, kernels_, {"--cuda-include", include_.string(), "--rewarm-count", "0"});
  ASSERT_TRUE(served.ready.ok()) << served.daemon->process().Output();
  auto before = served.Get("small.fill", {{"dtype", "fp32"}});
  ASSERT_TRUE(before.ok()) << before.status();

  WriteFile(include_ / "jitd_probe.h", "#pragma once\n#define JITD_PROBE 3\n");
  // The next compile notices the change. Its request was resolved under the
  // old toolkit's key, so it is refused (retryably), not compiled with the
  // new header under the old key.
  auto noticed = served.Get("small.fill", {{"dtype", "fp64"}});
  if (!noticed.ok()) {
    EXPECT_EQ(noticed.status().code(), absl::StatusCode::kUnavailable) << noticed.status();
    EXPECT_THAT(std::string(noticed.status().message()), HasSubstr("toolkit changed"));
  }
  ASSERT_TRUE(
      PollUntil([&] { return Count(served.daemon->process().Output(), "toolkit changed: ") >= 1; }, kProcessTimeout))
      << served.daemon->process().Output();

  auto after = served.Get("small.fill", {{"dtype", "fp32"}});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_NE(after->key(), before->key()) << "the same request under the new toolkit has a new key";
  EXPECT_NE(after->cubin(), before->cubin()) << "and new bytes (JITD_PROBE is in the code)";
  EXPECT_EQ(after->source(), v1::GetKernelResponse::COMPILED);
  auto retried = served.Get("small.fill", {{"dtype", "fp64"}});
  EXPECT_TRUE(retried.ok()) << retried.status();

  // SIGHUP with nothing changed since: no second "toolkit changed".
  served.daemon->process().Signal(SIGHUP);
  ASSERT_TRUE(
      PollUntil([&] { return Count(served.daemon->process().Output(), "reloaded kernels") >= 1; }, kProcessTimeout));
  const std::string log = served.daemon->process().Output();
  EXPECT_EQ(Count(log, "toolkit changed: "), 1u) << log;

  // The old key still holds the old bytes; the new key the new ones.
  cache::CacheOptions options;
  options.dir = served.daemon->cache_dir();
  options.read_only = true;
  auto cache = cache::Cache::Open(options);
  ASSERT_TRUE(cache.ok()) << cache.status();
  auto old_entry = (*cache)->Lookup(before->key(), cache::LookupCounting::kUncounted);
  ASSERT_TRUE(old_entry.ok()) << old_entry.status();
  EXPECT_EQ(old_entry->cubin, before->cubin()) << "old key paired with new bytes";
  auto new_entry = (*cache)->Lookup(after->key(), cache::LookupCounting::kUncounted);
  ASSERT_TRUE(new_entry.ok()) << new_entry.status();
  EXPECT_EQ(new_entry->cubin, after->cubin());
}

TEST_F(ToolkitChange, SighupNoticesAToolkitChangeBeforeAnyCompileDoes) {
  Served served(dir_, kernels_, {"--cuda-include", include_.string(), "--rewarm-count", "0"});
  ASSERT_TRUE(served.ready.ok()) << served.daemon->process().Output();
  auto before = served.Get("small.fill", {{"dtype", "fp32"}});
  ASSERT_TRUE(before.ok()) << before.status();
  WriteFile(include_ / "jitd_probe.h", "#pragma once\n#define JITD_PROBE 5\n");
  served.daemon->process().Signal(SIGHUP);
  ASSERT_TRUE(
      PollUntil([&] { return Count(served.daemon->process().Output(), "reloaded kernels") >= 1; }, kProcessTimeout));
  EXPECT_EQ(Count(served.daemon->process().Output(), "toolkit changed: "), 1u) << served.daemon->process().Output();
  auto after = served.Get("small.fill", {{"dtype", "fp32"}});
  ASSERT_TRUE(after.ok()) << after.status() << "\n" << served.daemon->process().Output();
  EXPECT_NE(after->key(), before->key());
  EXPECT_NE(after->cubin(), before->cubin());
}

// The most used instantiations (by hits) compile under the new toolkit in
// the background, before any request; the rest wait for theirs; the old
// generation's pinned entries are unpinned.
TEST_F(ToolkitChange, AfterAChangeTheMostUsedInstantiationsCompileBeforeAnyoneAsks) {
  Served served(dir_, kernels_, {"--cuda-include", include_.string(), "--rewarm-count", "2"});
  ASSERT_TRUE(served.ready.ok()) << served.daemon->process().Output();
  // Uses: fill fp32 three times, fill fp64 twice, scale once (a warm-up
  // pins fill fp32 first).
  WriteFile(dir_ / "one.toml", "[[spec]]\nkernel = \"small.fill\"\nparams = { dtype = \"fp32\" }\n");
  ASSERT_EQ(served.daemon->Jitctl({"warm", "--manifest", (dir_ / "one.toml").string()}).exit_code, 0);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(served.Get("small.fill", {{"dtype", "fp32"}}).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(served.Get("small.fill", {{"dtype", "fp64"}}).ok());
  auto scale = served.Get("small.scale", {{"clamp", "on"}});
  ASSERT_TRUE(scale.ok()) << scale.status();
  const v1::StatsResponse before = served.daemon->Stats();

  WriteFile(include_ / "jitd_probe.h", "#pragma once\n#define JITD_PROBE 7\n");
  served.daemon->process().Signal(SIGHUP);  // notices the change before any compile does
  v1::RewarmProgress rewarm;
  ASSERT_TRUE(PollUntil(
      [&] {
        rewarm = served.daemon->Stats().rewarm();
        return rewarm.trigger() == "toolkit changed" && rewarm.state() == "done";
      },
      std::chrono::seconds(60)))
      << rewarm.DebugString() << served.daemon->process().Output();
  EXPECT_EQ(rewarm.hot_set(), 2u);
  EXPECT_EQ(rewarm.ready(), 2u);
  EXPECT_EQ(rewarm.compiled(), 2u);
  EXPECT_EQ(rewarm.unpinned(), 1u) << "the old fill fp32 entry was pinned by the warm-up";
  const v1::StatsResponse after = served.daemon->Stats();
  EXPECT_EQ(after.compiles(), before.compiles() + 2);
  EXPECT_EQ(after.rewarm().generations(), 2u);
  EXPECT_EQ(after.rewarm().current_entries(), 2u);
  EXPECT_EQ(after.rewarm().older_entries(), 3u);

  // The two come from the cache; the third was left for its request.
  for (const char* dtype : {"fp32", "fp64"}) {
    auto got = served.Get("small.fill", {{"dtype", dtype}});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_NE(got->source(), v1::GetKernelResponse::COMPILED) << dtype;
  }
  auto scaled = served.Get("small.scale", {{"clamp", "on"}});
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  EXPECT_EQ(scaled->source(), v1::GetKernelResponse::COMPILED);
  EXPECT_NE(scaled->key(), scale->key());
  EXPECT_THAT(served.daemon->Jitctl({"stats"}).output, HasSubstr("2 most used: 2 ready under this toolkit"));
}

// An upgrade while the daemon was stopped, with two toolkit header trees on
// one cache, chosen by --cuda-include across a restart: copy B is copy A
// with a comment appended to a header fill.cu includes (another toolkit
// identity, so every key changes). The start on B compiles the top N of
// the cache's instantiations before any request; they are then hits, not
// compiles; the less used one waits for its request.
TEST_F(ToolkitChange, ADaemonStartedOnANewToolkitCompilesTheHotSetFirst) {
  const fs::path include_b = dir_ / "cuda-include-b";
  fs::copy(include_, include_b, fs::copy_options::recursive);
  WriteFile(include_b / "jitd_probe.h", ReadFile(include_ / "jitd_probe.h") + "// toolkit B\n");
  struct Use {
    std::string kernel;
    std::map<std::string, std::string> params;
    int times;
    std::string key_a;
  };
  // The least used last, so that hits (not recency) leave it out of the top 2.
  std::vector<Use> uses{{"small.fill", {{"dtype", "fp32"}}, 3, ""},
                        {"small.fill", {{"dtype", "fp64"}}, 2, ""},
                        {"small.scale", {{"clamp", "on"}}, 1, ""}};
  {
    Served a(dir_, kernels_, {"--cuda-include", include_.string(), "--rewarm-count", "0"});
    ASSERT_TRUE(a.ready.ok()) << a.daemon->process().Output();
    for (Use& use : uses) {
      for (int i = 0; i < use.times; ++i) {
        auto got = a.Get(use.kernel, use.params);
        ASSERT_TRUE(got.ok()) << got.status();
        use.key_a = got->key();
      }
    }
  }

  Served b(dir_, kernels_, {"--cuda-include", include_b.string(), "--rewarm-count", "2"});
  ASSERT_TRUE(b.ready.ok()) << b.daemon->process().Output();
  v1::StatsResponse stats;
  ASSERT_TRUE(PollUntil(
      [&] {
        stats = b.daemon->Stats();
        return stats.rewarm().trigger() == "start on a new toolkit" && stats.rewarm().state() == "done";
      },
      std::chrono::seconds(60)))
      << stats.rewarm().DebugString() << b.daemon->process().Output();
  const v1::RewarmProgress& rewarm = stats.rewarm();
  EXPECT_EQ(rewarm.hot_set(), 2u);
  EXPECT_EQ(rewarm.ready(), 2u);
  EXPECT_EQ(rewarm.compiled(), 2u);
  EXPECT_EQ(rewarm.failed(), 0u);
  EXPECT_EQ(rewarm.skipped(), 0u);
  EXPECT_EQ(stats.compiles(), 2u) << "the rewarm's two compiles, before any request";
  EXPECT_EQ(rewarm.generations(), 2u);
  EXPECT_EQ(rewarm.current_entries(), 2u) << "the top 2 under B's keys, and not the third";
  EXPECT_EQ(rewarm.older_entries(), 3u) << "A's three";
  EXPECT_GT(rewarm.older_bytes(), 0u);

  // The top 2: hits under B's keys, no compile.
  for (size_t i = 0; i < 2; ++i) {
    auto got = b.Get(uses[i].kernel, uses[i].params);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_NE(got->key(), uses[i].key_a) << uses[i].kernel;
    EXPECT_THAT(got->source(), ::testing::AnyOf(v1::GetKernelResponse::DISK, v1::GetKernelResponse::MEMORY))
        << uses[i].kernel;
  }
  EXPECT_EQ(b.daemon->Stats().compiles(), 2u) << "their first requests compiled nothing";
  // The third was left for its request.
  auto scale = b.Get(uses[2].kernel, uses[2].params);
  ASSERT_TRUE(scale.ok()) << scale.status();
  EXPECT_NE(scale->key(), uses[2].key_a);
  EXPECT_EQ(scale->source(), v1::GetKernelResponse::COMPILED);
  stats = b.daemon->Stats();
  EXPECT_EQ(stats.compiles(), 3u);
  EXPECT_EQ(stats.rewarm().current_entries(), 3u);
  EXPECT_EQ(stats.rewarm().older_entries(), 3u);

  const std::string shown = b.daemon->Jitctl({"stats"}).output;
  EXPECT_THAT(shown, HasSubstr("2 most used: 2 ready under this toolkit (2 compiled by the last run, 0 failed"));
  EXPECT_THAT(shown, ::testing::ContainsRegex("generations +2 in the cache: 3 entries \\([^)]+\\) current, 3 "
                                              "entries \\([^)]+\\) of older toolkits or kernels"))
      << shown;
}

}  // namespace
}  // namespace jitd
