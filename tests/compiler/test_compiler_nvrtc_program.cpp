// CompileInProcess: NVRTC in the test process (the reference the workers
// are compared against).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>

#include "compiler/nvrtc_program.h"
#include "test_programs.h"

namespace jitd::compiler {
namespace {

using testing::HasElfMagic;
using testing::TrivialJob;

TEST(NvrtcProgram, CompilesTrivialKernelToCubinWithDistinctLoweredNames) {
  const CompileJob job = TrivialJob();
  absl::StatusOr<CompileResult> result = CompileInProcess(job, nullptr, nullptr);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(HasElfMagic(result->cubin));
  ASSERT_EQ(result->lowered_names.size(), 2u);
  EXPECT_EQ(result->lowered_names[0].first, "sglang::scale<float>");
  EXPECT_EQ(result->lowered_names[1].first, "sglang::scale<int>");
  EXPECT_FALSE(result->lowered_names[0].second.empty());
  EXPECT_FALSE(result->lowered_names[1].second.empty());
  EXPECT_NE(result->lowered_names[0].second, result->lowered_names[1].second);
  EXPECT_GT(result->compile_ms, 0);
  EXPECT_FALSE(result->used_pch);
}

TEST(NvrtcProgram, ProjectHeadersComeFromMemoryUnderEverySpelling) {
  const CompileJob job = testing::HeaderJob();
  for (const std::string& option : job.options) {
    EXPECT_EQ(option.find("common"), std::string::npos) << "no -I finds the headers: " << option;
  }
  absl::StatusOr<CompileResult> result = CompileInProcess(job, nullptr, nullptr);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(HasElfMagic(result->cubin));
  // Other header bytes, other cubin: the compile used what the job carries.
  CompileJob other = job;
  other.headers[0].content.replace(other.headers[0].content.find("21"), 2, "22");
  absl::StatusOr<CompileResult> changed = CompileInProcess(other, nullptr, nullptr);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_NE(changed->cubin, result->cubin);
}

TEST(NvrtcProgram, ErrorsNameTheUsersFileNotTheIncludeName) {
  CompileJob job = testing::HeaderJob();
  job.headers[1].content = "#pragma once\nnamespace sglang { __device__ inline int twice(int v) { return oops; } }\n";
  job.log_root = "/home/user/kernels";
  absl::StatusOr<CompileResult> result = CompileInProcess(job, nullptr, nullptr);
  ASSERT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition) << result.status();
  const std::string log = NvrtcLogOf(result.status()).value_or("");
  EXPECT_NE(log.find("/home/user/kernels/common/twice.cuh(2): error"), std::string::npos) << log;
  EXPECT_NE(log.find("\"/home/user/kernels/tests/with_headers.cu\""), std::string::npos) << log;
  EXPECT_NE(result.status().message().find("/home/user/kernels/common/twice.cuh(2)"), std::string_view::npos);
}

TEST(NvrtcProgram, LogPathsAreRewrittenOnlyAtNameBoundaries) {
  CompileJob job = testing::HeaderJob();
  job.log_root = "/k";
  EXPECT_EQ(LogWithUserPaths(job, "twice.cuh(3): error: x\ncommon/twice.cuh is not retwice.cuh\n"),
            "/k/common/twice.cuh(3): error: x\ncommon/twice.cuh is not retwice.cuh\n");
  job.log_root.clear();
  EXPECT_EQ(LogWithUserPaths(job, "twice.cuh(3): error"), "twice.cuh(3): error");
}

TEST(NvrtcProgram, SameJobWithRandomSeedGivesIdenticalCubin) {
  const CompileJob job = TrivialJob();
  absl::StatusOr<CompileResult> first = CompileInProcess(job, nullptr, nullptr);
  absl::StatusOr<CompileResult> second = CompileInProcess(job, nullptr, nullptr);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->cubin, second->cubin);
}

TEST(NvrtcProgram, SyntaxErrorIsFailedPreconditionCarryingTheLog) {
  CompileJob job = TrivialJob();
  job.source = "namespace sglang { __global__ void broken(float* x) { x[0] = 1 } }";
  job.name_expressions = {"sglang::broken"};
  absl::StatusOr<CompileResult> result = CompileInProcess(job, nullptr, nullptr);
  ASSERT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition) << result.status();
  EXPECT_NE(result.status().message().find("expected a \";\""), absl::string_view::npos) << result.status();
  EXPECT_NE(result.status().message().find(job.program_name), absl::string_view::npos);
  std::optional<std::string> log = NvrtcLogOf(result.status());
  ASSERT_TRUE(log.has_value());
  EXPECT_NE(log->find("error"), std::string::npos);
}

TEST(NvrtcProgram, UnknownOptionIsInvalidArgument) {
  CompileJob job = TrivialJob();
  job.options.push_back("--no-such-option");
  absl::StatusOr<CompileResult> result = CompileInProcess(job, nullptr, nullptr);
  ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << result.status();
  EXPECT_NE(result.status().message().find("--no-such-option"), absl::string_view::npos);
}

// A virtual architecture has no cubin: its answer is the PTX, as text
// cuModuleLoadData takes (NUL-terminated), with the lowered names.
TEST(NvrtcProgram, VirtualArchitectureGivesItsPtx) {
  CompileJob job = TrivialJob();
  std::replace(job.options.begin(), job.options.end(), std::string("-arch=sm_90"), std::string("-arch=compute_90"));
  absl::StatusOr<CompileResult> result = CompileInProcess(job, nullptr, nullptr);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_FALSE(result->cubin.empty());
  EXPECT_EQ(result->cubin.back(), '\0');
  EXPECT_NE(result->cubin.find(".target sm_90"), std::string::npos);
  EXPECT_NE(result->cubin.find(".version "), std::string::npos);
  ASSERT_FALSE(result->lowered_names.empty());
  EXPECT_NE(result->cubin.find(result->lowered_names.front().second), std::string::npos);
}

TEST(NvrtcProgram, SetCancelFlagCancelsTheCompile) {
  const std::atomic<bool> cancel{true};
  absl::StatusOr<CompileResult> result = CompileInProcess(TrivialJob(), nullptr, &cancel);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled) << result.status();
}

TEST(NvrtcProgram, ReportsVersionAndSupportedArchs) {
  const NvrtcVersionNumber version = NvrtcVersion();
  EXPECT_GE(version.major, 12);
  const std::vector<int> archs = SupportedArchs();
  ASSERT_FALSE(archs.empty());
  EXPECT_TRUE(std::is_sorted(archs.begin(), archs.end()));
  EXPECT_NE(std::find(archs.begin(), archs.end(), 90), archs.end());
}

}  // namespace
}  // namespace jitd::compiler
