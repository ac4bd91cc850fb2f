// The module check in a real daemon: a tree whose text passes the source
// check but whose module defines a kernel outside the namespace starts, and
// the daemon refuses that module (FAILED_PRECONDITION naming the symbol),
// stores nothing, and answers the same refusal again; the four trees whose
// text once misled the source check, served with --allow-guard-findings,
// are refused the same way; a clean kernel of the same daemon is served.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "kernel_fixtures.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using ::testing::HasSubstr;
using testing::KernelRequest;
using testing::TempDir;
using testing::TestDaemon;

const std::string kFixtures = JITD_GUARD_FIXTURES;

TEST(ModuleServing, ModuleOutsideTheNamespaceIsRefusedNamingTheSymbolAndNeverStored) {
  TempDir dir;
  TestDaemon daemon(dir, {"--kernels", kFixtures + "/module_check", "--workers", "1"});
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  auto client = daemon.Connect("", std::chrono::seconds(60));
  for (int attempt = 0; attempt < 2; ++attempt) {  // the second is the remembered failure
    const absl::Status refused = client->GetKernel(KernelRequest("bypass.fill")).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
    EXPECT_THAT(std::string(refused.message()),
                HasSubstr("kernel bypass.fill: the namespace guard refuses its compiled module: it defines kernel "
                          "`leak(float*)` (_Z4leakPf) outside namespace sglang"));
  }
  const v1::StatsResponse stats = daemon.Stats();
  EXPECT_EQ(stats.entries(), 0u) << "a refused module is never cached";
  EXPECT_EQ(stats.compiles(), 1u);
  EXPECT_EQ(stats.compile_failures(), 1u);
}

TEST(ModuleServing, TreesThatMisledTheSourceCheckAreRefusedEvenWithAllowGuardFindings) {
  for (const std::string name : {"bypass_if0", "bypass_cuda_extension", "bypass_digraphs", "bypass_comment_splice"}) {
    SCOPED_TRACE(name);
    TempDir dir;
    TestDaemon daemon(dir, {"--kernels", kFixtures + "/" + name, "--allow-guard-findings", "--workers", "1"});
    ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
    const absl::Status refused =
        daemon.Connect("", std::chrono::seconds(60))->GetKernel(KernelRequest("bypass.fill")).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
    EXPECT_THAT(std::string(refused.message()),
                HasSubstr("it defines kernel `leak` with a C name (extern \"C\"), outside namespace sglang"));
    EXPECT_EQ(daemon.Stats().entries(), 0u);
  }
}

TEST(ModuleServing, CleanModuleOfTheSameDaemonIsServed) {
  TempDir dir;
  TestDaemon daemon(dir, {"--kernels", kFixtures + "/lint_tiny", "--workers", "1"});
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  auto answer =
      daemon.Connect("", std::chrono::seconds(60))->GetKernel(KernelRequest("tiny.fill", {{"dtype", "fp32"}}));
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(daemon.Stats().entries(), 1u);
}

}  // namespace
}  // namespace jitd
