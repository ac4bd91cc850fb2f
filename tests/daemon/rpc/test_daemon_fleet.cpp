// Fleet arch sets and fatbins against the real daemon: PTX for compute_
// archs, fatbins of several archs read back with jitd/fatbin.h and held
// against the single-arch answers, the daemon's fleet set (--fleet-archs),
// warming it, and requests for archs outside it counted as misses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "jitd/fatbin.h"
#include "kernel_fixtures.h"
#include "process.h"
#include "temp_dir.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using testing::TestDaemon;

std::vector<std::string> Small(std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--kernels", testing::SmallKernelsDir().string(), "--workers", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

v1::GetKernelRequest Fill(const std::string& arch = "",
                          v1::GetKernelRequest::Mode mode = v1::GetKernelRequest::COMPILE) {
  v1::GetKernelRequest request = testing::KernelRequest("small.fill", {{"dtype", "fp32"}}, mode);
  request.set_arch(arch);
  return request;
}

TEST(Fleet, AComputeArchIsAnsweredWithItsPtx) {
  TempDir dir;
  TestDaemon daemon(dir, Small());
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  auto ptx = daemon.Connect()->GetKernel(Fill("compute_80"));
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_EQ(ptx->arch(), "compute_80");
  ASSERT_FALSE(ptx->cubin().empty());
  EXPECT_EQ(ptx->cubin().back(), '\0') << "NUL-terminated, as cuModuleLoadData reads PTX";
  EXPECT_THAT(ptx->cubin(), HasSubstr(".target sm_80"));
  EXPECT_THAT(ptx->cubin(), HasSubstr(".entry"));
  ASSERT_FALSE(ptx->symbols().empty());
  EXPECT_THAT(ptx->cubin(), HasSubstr(ptx->symbols(0).lowered_name()));
  auto again = daemon.Connect()->GetKernel(Fill("compute_80", v1::GetKernelRequest::CACHED_ONLY));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->cubin(), ptx->cubin());
}

TEST(Fleet, SeveralArchsAreOneFatbinOfTheirSingleArchAnswers) {
  TempDir dir;
  TestDaemon daemon(dir, Small());
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  auto client = daemon.Connect();
  v1::GetKernelRequest request = Fill();
  for (const char* arch : {"sm_80", "sm_100", "compute_80"}) request.add_archs(arch);
  auto fat = client->GetKernel(request);
  ASSERT_TRUE(fat.ok()) << fat.status();
  EXPECT_EQ(fat->source(), v1::GetKernelResponse::COMPILED);
  EXPECT_EQ(fat->arch(), "sm_80+sm_100+compute_80");
  EXPECT_THAT(std::vector<std::string>(fat->fatbin_archs().begin(), fat->fatbin_archs().end()),
              ::testing::ElementsAre("sm_80", "sm_100", "compute_80"));
  EXPECT_TRUE(fatbin::LooksLikeFatbin(fat->cubin()));
  EXPECT_EQ(fat->cubin_size(), fat->cubin().size());
  ASSERT_FALSE(fat->symbols().empty());

  absl::StatusOr<std::vector<fatbin::Image>> images = fatbin::ReadFatbin(fat->cubin());
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_EQ(images->size(), 3u);
  // Each part is the cached single-arch answer, byte for byte.
  const std::vector<std::string> archs = {"sm_80", "sm_100", "compute_80"};
  for (size_t i = 0; i < archs.size(); ++i) {
    auto single = client->GetKernel(Fill(archs[i], v1::GetKernelRequest::CACHED_ONLY));
    ASSERT_TRUE(single.ok()) << archs[i] << ": " << single.status();
    std::string expected = single->cubin();
    if (archs[i].starts_with("compute_")) {
      EXPECT_EQ((*images)[i].kind, fatbin::ImageKind::kPtx);
      if (!expected.empty() && expected.back() == '\0') expected.pop_back();
    } else {
      EXPECT_EQ((*images)[i].kind, fatbin::ImageKind::kCubin);
    }
    EXPECT_EQ((*images)[i].arch, i == 1 ? 100 : 80);
    std::string got = (*images)[i].bytes;
    while (!got.empty() && got.back() == '\0' && archs[i].starts_with("compute_")) got.pop_back();
    EXPECT_EQ(got, expected) << archs[i];
  }
  // Asked again: every part is cached now, and the same fatbin comes back.
  auto cached = client->GetKernel([&] {
    v1::GetKernelRequest r = request;
    r.set_mode(v1::GetKernelRequest::CACHED_ONLY);
    return r;
  }());
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(cached->source(), v1::GetKernelResponse::MEMORY);
  EXPECT_EQ(cached->cubin(), fat->cubin());
  EXPECT_EQ(cached->key(), fat->key());
}

TEST(Fleet, BadArchListsAreRefusedSayingWhy) {
  TempDir dir;
  TestDaemon daemon(dir, Small());
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  auto client = daemon.Connect();
  v1::GetKernelRequest twice = Fill();
  twice.add_archs("sm_80");
  twice.add_archs("sm_80");
  EXPECT_THAT(client->GetKernel(twice).status().message(), HasSubstr("names sm_80 twice"));
  v1::GetKernelRequest both = Fill("sm_90");
  both.add_archs("sm_80");
  EXPECT_EQ(client->GetKernel(both).status().code(), absl::StatusCode::kInvalidArgument);
  v1::GetKernelRequest bad = Fill();
  bad.add_archs("sm_80");
  bad.add_archs("sm_7");
  auto refused = client->GetKernel(bad);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("sm_7: "));
  v1::GetKernelRequest fleet = Fill();
  fleet.set_fleet(true);
  auto none = client->GetKernel(fleet);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr("--fleet-archs"));
}

TEST(Fleet, TheFleetSetIsWarmedServedAsOneFatbinAndOtherArchsAreCounted) {
  TempDir dir;
  TestDaemon daemon(dir, Small({"--fleet-archs", "sm_90a,sm_80"}));
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  testing::WriteFile(dir / "one.toml", "[[spec]]\nkernel = \"small.fill\"\nparams = { dtype = \"fp32\" }\n");
  const auto warmed = daemon.Jitctl({"warm", "--manifest", (dir / "one.toml").string(), "--fleet"});
  ASSERT_EQ(warmed.exit_code, 0) << warmed.output;
  EXPECT_THAT(warmed.output, HasSubstr("3 compiled"));

  v1::GetKernelRequest fleet = Fill("", v1::GetKernelRequest::CACHED_ONLY);
  fleet.set_fleet(true);
  auto fat = daemon.Connect()->GetKernel(fleet);
  ASSERT_TRUE(fat.ok()) << fat.status();
  EXPECT_EQ(fat->arch(), "sm_90a+sm_80+compute_80");
  absl::StatusOr<std::vector<fatbin::Image>> images = fatbin::ReadFatbin(fat->cubin());
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_EQ(images->size(), 3u);
  EXPECT_EQ(images->back().kind, fatbin::ImageKind::kPtx);

  // A GPU the set does not list is served, compiled on demand, and counted.
  auto outside = daemon.Connect()->GetKernel(Fill("sm_100"));
  ASSERT_TRUE(outside.ok()) << outside.status();
  ASSERT_TRUE(daemon.Connect()->GetKernel(Fill("sm_100")).ok());
  const v1::StatsResponse stats = daemon.Stats();
  EXPECT_THAT(std::vector<std::string>(stats.fleet_targets().begin(), stats.fleet_targets().end()),
              ::testing::ElementsAre("sm_90a", "sm_80", "compute_80"));
  ASSERT_EQ(stats.arch_misses().count("sm_100"), 1u);
  EXPECT_EQ(stats.arch_misses().at("sm_100"), 2u);
  EXPECT_EQ(stats.arch_misses().count("sm_80"), 0u);
  const auto shown = daemon.Jitctl({"stats"});
  EXPECT_THAT(shown.output, HasSubstr("sm_90a+sm_80+compute_80; requests for other archs: sm_100 2"));
}

TEST(Fleet, AFleetSetTheToolkitCannotCompileStopsTheStart) {
  TempDir dir;
  std::vector<std::string> args = TestDaemon::DefaultArgs(dir);
  for (const std::string& arch : Small({"--fleet-archs", "sm_90,sm_990"})) args.push_back(arch);
  const auto refused = testing::RunProcess(args, dir / "jitd.log", testing::kProcessTimeout);
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("--fleet-archs: arch 'sm_990' is not supported"));
}

}  // namespace
}  // namespace jitd
