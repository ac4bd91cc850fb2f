// The operator's session against a real jitd serving the shipped kernels:
// `jitctl warm --all`, then `ls`, `stats`, `evict --dry-run` and
// `evict --max-bytes`, as tables and as --json.
#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <iostream>

#include "kernel_fixtures.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ProcessResult;
using testing::TempDir;
using testing::TestDaemon;

// Every instantiation of kernels/kernels.toml for one arch (tests/guard's
// lint test counts 52 for two).
constexpr uint64_t kShippedInstantiations = 26;
const std::vector<std::string> kShippedKernels = {"diffusion.modulate_scale_shift",
                                                  "diffusion.residual_gate_add",
                                                  "moe.align_block_size",
                                                  "moe.align_single_token",
                                                  "moe.topk_sum",
                                                  "activation.silu_and_mul",
                                                  "norm.rmsnorm"};
// A full warm-up of the shipped kernels on a loaded two-core machine.
constexpr std::chrono::minutes kWarmTimeout{10};

template <typename Message>
Message ParseJson(const ProcessResult& result) {
  Message message;
  const auto parsed = google::protobuf::util::JsonStringToMessage(result.output, &message);
  EXPECT_TRUE(parsed.ok()) << parsed.ToString() << "\n" << result.output;
  return message;
}

class JitctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<TestDaemon>(
        dir_, std::vector<std::string>{"--kernels", testing::ShippedKernelsDir().string(), "--workers", "2"});
    ASSERT_TRUE(daemon_->WaitUntilServing().ok()) << daemon_->process().Output();
  }

  // Runs jitctl; human-readable output is echoed, so that the test log
  // shows the session as an operator sees it.
  ProcessResult Jitctl(const std::vector<std::string>& args) {
    ProcessResult result = daemon_->Jitctl(args, kWarmTimeout);
    if (args.front() != "--json") {
      std::cout << "$ jitctl";
      for (const std::string& arg : args) std::cout << ' ' << arg;
      std::cout << '\n' << result.output;
    }
    return result;
  }

  TempDir dir_;
  std::unique_ptr<TestDaemon> daemon_;
};

TEST_F(JitctlTest, WarmAllThenLsStatsEvictDryRunAndEvictMaxBytesOnTheShippedKernels) {
  const ProcessResult warm = Jitctl({"warm", "--all"});
  ASSERT_EQ(warm.exit_code, 0) << warm.output;
  EXPECT_THAT(warm.output, ContainsRegex("26 compiled, 0 (already )?cached, 0 failed"));

  const ProcessResult ls = Jitctl({"ls"});
  ASSERT_EQ(ls.exit_code, 0) << ls.output;
  for (const std::string& kernel : kShippedKernels) EXPECT_THAT(ls.output, HasSubstr(kernel));
  EXPECT_THAT(ls.output, ContainsRegex("norm.rmsnorm +dtype=bf16,threads=1024 +sm_90"));
  EXPECT_THAT(ls.output, HasSubstr("26 of 26 entries"));
  const auto listed = ParseJson<v1::ListEntriesResponse>(Jitctl({"--json", "ls"}));
  EXPECT_EQ(listed.total(), kShippedInstantiations);
  for (const v1::EntryInfo& entry : listed.entries()) {
    EXPECT_EQ(entry.arch(), "sm_90");
    EXPECT_EQ(entry.nvrtc_version(), "13.0");
    EXPECT_EQ(entry.kind(), "cubin");
  }
  EXPECT_THAT(ls.output, Not(HasSubstr("KIND"))) << "a cache of cubins has no kind column";

  const ProcessResult stats = Jitctl({"stats"});
  ASSERT_EQ(stats.exit_code, 0) << stats.output;
  // A warm-up pins the manifest's instantiations: ad-hoc entries never evict them.
  EXPECT_THAT(stats.output, ContainsRegex("entries +26 \\(26 pinned\\)"));
  EXPECT_THAT(stats.output, ContainsRegex("kernels +7 from " + testing::ShippedKernelsDir().string() +
                                          " \\(fingerprint [0-9a-f]{12}, NVRTC 13.0\\)"));
  EXPECT_THAT(stats.output, ContainsRegex("compiles +26 \\(0 rejected by NVRTC, 0 errors"));
  EXPECT_THAT(stats.output, ContainsRegex("workers +2 \\("));
  const auto counters = ParseJson<v1::StatsResponse>(Jitctl({"--json", "stats"}));
  EXPECT_EQ(counters.entries(), kShippedInstantiations);
  EXPECT_EQ(counters.compiles(), kShippedInstantiations);
  EXPECT_EQ(counters.requests(), kShippedInstantiations);
  EXPECT_EQ(counters.kernels(), kShippedKernels.size());
  EXPECT_EQ(counters.workers(), 2u);
  EXPECT_EQ(counters.max_queue(), 256u);
  EXPECT_EQ(counters.hot_entries(), kShippedInstantiations);
  EXPECT_THAT(counters.kernels_fingerprint(), ::testing::MatchesRegex("[0-9a-f]{64}"));

  const std::string half = std::to_string(counters.bytes() / 2);
  // Pinned: kept by the budget and by an evict that does not name them.
  const auto kept = ParseJson<v1::EvictResponse>(Jitctl({"--json", "evict", "--dry-run", "--max-bytes", half}));
  EXPECT_EQ(kept.evicted_entries(), 0u);
  const ProcessResult dry_run = Jitctl({"evict", "--dry-run", "--include-pinned", "--max-bytes", half});
  ASSERT_EQ(dry_run.exit_code, 0) << dry_run.output;
  EXPECT_THAT(dry_run.output, ContainsRegex("would evict [0-9]+ entries"));
  const auto would =
      ParseJson<v1::EvictResponse>(Jitctl({"--json", "evict", "--dry-run", "--include-pinned", "--max-bytes", half}));
  EXPECT_TRUE(would.dry_run());
  EXPECT_GT(would.evicted_entries(), 0u);
  EXPECT_LE(would.remaining_bytes(), counters.bytes() / 2);
  EXPECT_EQ(ParseJson<v1::ListEntriesResponse>(Jitctl({"--json", "ls"})).total(), kShippedInstantiations);

  const ProcessResult evict = Jitctl({"evict", "--include-pinned", "--max-bytes", half});
  ASSERT_EQ(evict.exit_code, 0) << evict.output;
  EXPECT_THAT(evict.output, HasSubstr("evicted " + std::to_string(would.evicted_entries()) + " entries"));
  const auto after = ParseJson<v1::StatsResponse>(Jitctl({"--json", "stats"}));
  EXPECT_EQ(after.entries(), kShippedInstantiations - would.evicted_entries());
  EXPECT_LE(after.bytes(), counters.bytes() / 2);
}

TEST_F(JitctlTest, KernelsListsTheShippedManifest) {
  const ProcessResult kernels = Jitctl({"kernels"});
  ASSERT_EQ(kernels.exit_code, 0) << kernels.output;
  for (const std::string& kernel : kShippedKernels) EXPECT_THAT(kernels.output, HasSubstr(kernel));
  const auto listed = ParseJson<v1::ListKernelsResponse>(Jitctl({"--json", "kernels"}));
  EXPECT_EQ(static_cast<size_t>(listed.kernels_size()), kShippedKernels.size());
  uint64_t instantiations = 0;
  for (const v1::KernelInfo& kernel : listed.kernels()) instantiations += kernel.instantiations();
  EXPECT_EQ(instantiations, kShippedInstantiations);
  EXPECT_EQ(listed.default_arch(), "sm_90");
}

TEST_F(JitctlTest, GetOfAnUnknownKernelExitsOneWithTheDaemonsMessage) {
  const ProcessResult get = Jitctl({"get", "moe.topk_summ", "-p", "dtype=bf16"});
  EXPECT_EQ(get.exit_code, 1);
  EXPECT_THAT(get.output, HasSubstr("NOT_FOUND: unknown kernel 'moe.topk_summ'; did you mean moe.topk_sum?"));
}

}  // namespace
}  // namespace jitd
