// SIGHUP: a running jitd re-reads its kernels directory. What changed gets
// new keys, what did not keeps its keys (and its cached cubins), nothing
// cached is lost, and kernels that fail the namespace guard (or do not
// load) never replace the ones being served.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "kernel_fixtures.h"
#include "poll_until.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using ::testing::HasSubstr;
using testing::KernelRequest;
using testing::kProcessTimeout;
using ::testing::Not;
using testing::PollUntil;
using testing::TempDir;
using testing::TestDaemon;
using testing::WriteFile;

std::string ReadFile(const std::filesystem::path& file) {
  std::ifstream stream(file);
  std::stringstream content;
  content << stream.rdbuf();
  return content.str();
}

// A daemon serving a private copy of the small fixture kernels, which the
// test edits.
class ReloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::CopyTree(testing::SmallKernelsDir(), kernels_);
    daemon_ = std::make_unique<TestDaemon>(dir_, std::vector<std::string>{"--kernels", kernels_.string()});
    ASSERT_TRUE(daemon_->WaitUntilServing().ok()) << daemon_->process().Output();
    client_ = daemon_->Connect("", std::chrono::seconds(120));
    fingerprint_ = daemon_->Stats().kernels_fingerprint();
  }

  absl::StatusOr<v1::GetKernelResponse> Get(const std::string& kernel,
                                            const std::map<std::string, std::string>& params = {}) {
    return client_->GetKernel(KernelRequest(kernel, params));
  }

  // Sends SIGHUP and waits until the daemon has logged the outcome of the
  // reload: `expected` in its output `occurrence` times.
  void Reload(const std::string& expected, size_t occurrence = 1) {
    daemon_->process().Signal(SIGHUP);
    ASSERT_TRUE(PollUntil(
        [&] {
          const std::string log = daemon_->process().Output();
          size_t count = 0;
          for (size_t at = log.find(expected); at != std::string::npos; at = log.find(expected, at + 1)) ++count;
          return count >= occurrence;
        },
        kProcessTimeout))
        << daemon_->process().Output();
  }

  TempDir dir_;
  const std::filesystem::path kernels_ = dir_ / "kernels";
  std::unique_ptr<TestDaemon> daemon_;
  std::unique_ptr<Client> client_;
  std::string fingerprint_;
};

TEST_F(ReloadTest, AKernelEditGivesThatKernelANewKeyAndKeepsEveryOtherKeyAndEntry) {
  absl::StatusOr<v1::GetKernelResponse> fill = Get("small.fill", {{"dtype", "fp32"}});
  absl::StatusOr<v1::GetKernelResponse> scale = Get("small.scale");
  ASSERT_TRUE(fill.ok() && scale.ok()) << fill.status() << scale.status();

  const std::string clamp = "fminf(1.0f, fmaxf(-1.0f, v))";
  std::string source = ReadFile(kernels_ / "scale.cu");
  ASSERT_NE(source.find(clamp), std::string::npos);
  source.replace(source.find(clamp), clamp.size(), "fminf(2.0f, fmaxf(-2.0f, v))");
  WriteFile(kernels_ / "scale.cu", source);
  Reload("reloaded kernels: 4 kernels, fingerprint");

  const v1::StatsResponse stats = daemon_->Stats();
  EXPECT_NE(stats.kernels_fingerprint(), fingerprint_);
  EXPECT_THAT(daemon_->process().Output(), HasSubstr("(was " + fingerprint_.substr(0, 12) + ")"));
  absl::StatusOr<v1::GetKernelResponse> new_scale = Get("small.scale");
  ASSERT_TRUE(new_scale.ok()) << new_scale.status();
  EXPECT_NE(new_scale->key(), scale->key());
  EXPECT_EQ(new_scale->source(), v1::GetKernelResponse::COMPILED);
  absl::StatusOr<v1::GetKernelResponse> same_fill = Get("small.fill", {{"dtype", "fp32"}});
  ASSERT_TRUE(same_fill.ok()) << same_fill.status();
  EXPECT_EQ(same_fill->key(), fill->key());
  EXPECT_EQ(same_fill->source(), v1::GetKernelResponse::MEMORY);

  // The old scale entry is still in the cache, beside the new one.
  absl::StatusOr<v1::ListEntriesResponse> entries = client_->ListEntries({});
  ASSERT_TRUE(entries.ok()) << entries.status();
  std::set<std::string> keys;
  for (const v1::EntryInfo& entry : entries->entries()) keys.insert(entry.key());
  EXPECT_EQ(keys, (std::set<std::string>{fill->key(), scale->key(), new_scale->key()}));
}

TEST_F(ReloadTest, AHeaderEditGivesNewKeysToEveryKernelIncludingItOnly) {
  absl::StatusOr<v1::GetKernelResponse> fill = Get("small.fill", {{"dtype", "fp32"}});
  absl::StatusOr<v1::GetKernelResponse> scale = Get("small.scale");
  ASSERT_TRUE(fill.ok() && scale.ok()) << fill.status() << scale.status();
  ASSERT_EQ(Get("small.broken").status().code(), absl::StatusCode::kFailedPrecondition);

  WriteFile(kernels_ / "include/index.cuh", ReadFile(kernels_ / "include/index.cuh") + "// edited\n");
  Reload("reloaded kernels");
  EXPECT_NE(Get("small.fill", {{"dtype", "fp32"}})->key(), fill->key());
  EXPECT_NE(Get("small.scale")->key(), scale->key());
  // small.broken includes nothing: same key, so its failure is still remembered.
  absl::StatusOr<v1::GetKernelResponse> broken_after = Get("small.broken");
  EXPECT_THAT(std::string(broken_after.status().message()), HasSubstr("remembered"));
  EXPECT_EQ(daemon_->Stats().compiles(), 5u);  // fill, scale, broken; then fill and scale again
}

TEST_F(ReloadTest, GuardFindingsKeepTheOldKernelsServingAndAreLogged) {
  absl::StatusOr<v1::GetKernelResponse> scale = Get("small.scale");
  ASSERT_TRUE(scale.ok()) << scale.status();
  // A kernel moved out of namespace sglang, as the seed's misses were.
  WriteFile(kernels_ / "scale.cu", "namespace {\n__global__ void helper() {}\n}\n" + ReadFile(kernels_ / "scale.cu"));
  Reload("kernel reload failed");

  const std::string log = daemon_->process().Output();
  EXPECT_THAT(log, HasSubstr("namespace guard: scale.cu:1:"));
  EXPECT_THAT(log, HasSubstr("still serving the previous kernels (fingerprint " + fingerprint_.substr(0, 12) + ")"));
  EXPECT_THAT(log, Not(HasSubstr("reloaded kernels")));
  EXPECT_EQ(daemon_->Stats().kernels_fingerprint(), fingerprint_);
  absl::StatusOr<v1::GetKernelResponse> still = Get("small.scale");
  ASSERT_TRUE(still.ok()) << still.status();
  EXPECT_EQ(still->key(), scale->key());
  EXPECT_EQ(still->source(), v1::GetKernelResponse::MEMORY);

  // Fixed, the next SIGHUP takes it.
  WriteFile(kernels_ / "scale.cu", ReadFile(testing::SmallKernelsDir() / "scale.cu") + "// fixed\n");
  Reload("reloaded kernels");
  EXPECT_NE(daemon_->Stats().kernels_fingerprint(), fingerprint_);
}

TEST_F(ReloadTest, AManifestThatNoLongerParsesKeepsTheOldKernels) {
  WriteFile(kernels_ / "kernels.toml", ReadFile(kernels_ / "kernels.toml") + "\n[[kernel]]\nname = 3\n");
  Reload("kernel reload failed");
  EXPECT_THAT(daemon_->process().Output(), HasSubstr("cannot load the kernels in " + kernels_.string()));
  EXPECT_EQ(daemon_->Stats().kernels_fingerprint(), fingerprint_);
  absl::StatusOr<v1::ListKernelsResponse> listed = client_->ListKernels({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->kernels_size(), 4);
}

TEST_F(ReloadTest, ANewKernelInTheManifestIsServedAfterSighup) {
  WriteFile(kernels_ / "twice.cu",
            "namespace sglang::small {\n__global__ void twice_kernel(float* x) { x[0] *= 2.0f; }\n}\n");
  WriteFile(kernels_ / "kernels.toml", ReadFile(kernels_ / "kernels.toml") +
                                           "\n[[kernel]]\nname = \"small.twice\"\nsource = \"twice.cu\"\n"
                                           "name_expressions = [\"sglang::small::twice_kernel\"]\n");
  EXPECT_EQ(Get("small.twice").status().code(), absl::StatusCode::kNotFound);
  Reload("reloaded kernels: 5 kernels");
  absl::StatusOr<v1::GetKernelResponse> twice = Get("small.twice");
  ASSERT_TRUE(twice.ok()) << twice.status();
  EXPECT_EQ(twice->source(), v1::GetKernelResponse::COMPILED);
  EXPECT_EQ(daemon_->Stats().kernels(), 5u);
}

}  // namespace
}  // namespace jitd
