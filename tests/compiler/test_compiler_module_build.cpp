// Module builds (compiler/module_build.h) with the real nvcc and host
// compiler: staged files, include dirs, the depfile check that refuses a
// read no key covers, nvcc's errors with their log, the deadline, and the
// exports check. Small units (no tvm-ffi), so each build takes a second or
// two; serving the project's module tree is tests/daemon's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "compiler/module_build.h"
#include "compiler/nvrtc_program.h"

namespace jitd::compiler {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class ModuleBuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/jitd-module-build-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    if (access(JITD_NVCC, X_OK) != 0) GTEST_SKIP() << "no nvcc at " << JITD_NVCC;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A unit that includes "answer.h" through the include dir `inc` and
  // exports __tvm_ffi_answer, built for sm_90.
  CompileJob Job() const {
    CompileJob job;
    job.kind = ArtifactKind::kSharedObject;
    job.program_name = "__jitd_module__.cu";
    job.source =
        "#include \"answer.h\"\n"
        "extern \"C\" __attribute__((visibility(\"default\"))) int __tvm_ffi_answer(void*, const void*, int, "
        "void*) { return ANSWER; }\n"
        "namespace team { __global__ void touch(int* p) { *p = ANSWER; } }\n";
    job.headers = {{"inc/answer.h", "inc/answer.h", "#pragma once\n#define ANSWER 42\n"}};
    job.name_expressions = {"answer"};
    job.module.nvcc = JITD_NVCC;
    job.module.host_cxx = "/usr/bin/g++";
    job.module.compile_options = {"-std=c++17", "-gencode=arch=compute_90,code=sm_90", "-Xcompiler=-fPIC", "-Iinc"};
    std::error_code ec;
    job.module.read_roots = {fs::weakly_canonical(JITD_CUDA_INCLUDE_DIR, ec).string(), "/usr/include", "/usr/lib/gcc",
                             "/usr/local/include"};
    job.timeout = std::chrono::minutes(2);
    return job;
  }

  fs::path dir_;
};

TEST(DepfileInputs, ReadsEveryDependencyWithEscapesAndContinuations) {
  EXPECT_EQ(DepfileInputs("unit.o : a.h /usr/include/b\\ c.h \\\n  d$$.h\n"),
            (std::vector<std::string>{"a.h", "/usr/include/b c.h", "d$.h"}));
  EXPECT_EQ(DepfileInputs("unit.o: \\\r\n x.h"), std::vector<std::string>{"x.h"});
  EXPECT_EQ(DepfileInputs("unit.o:first.h second.h"), (std::vector<std::string>{"first.h", "second.h"}));
  EXPECT_TRUE(DepfileInputs("").empty());
}

TEST_F(ModuleBuildTest, BuildsASharedObjectFromTheStagedFilesAndNamesItsExports) {
  absl::StatusOr<CompileResult> result = BuildModule(Job(), dir_ / "scratch", nullptr);
  ASSERT_TRUE(result.ok()) << result.status() << "\n" << NvrtcLogOf(result.status()).value_or("");
  ASSERT_GE(result->cubin.size(), 20u);
  EXPECT_EQ(result->cubin.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_EQ(static_cast<unsigned char>(result->cubin[18]), 62u);  // EM_X86_64: host code, not a cubin
  EXPECT_EQ(result->lowered_names, (std::vector<std::pair<std::string, std::string>>{{"answer", "__tvm_ffi_answer"}}));
  EXPECT_THAT(result->log, HasSubstr("-MD"));  // each command line heads its part of the log
  EXPECT_GT(result->compile_ms, 0);
  EXPECT_TRUE(fs::is_empty(dir_ / "scratch")) << "the scratch directory is emptied after a build";
}

TEST_F(ModuleBuildTest, AReadOutsideTheStagedTreeAndTheRootsFailsTheBuild) {
  std::ofstream(dir_ / "outside.h") << "#define OUTSIDE 1\n";
  CompileJob job = Job();
  job.source = "#include \"" + (dir_ / "outside.h").string() + "\"\n" + job.source;
  absl::StatusOr<CompileResult> result = BuildModule(job, dir_ / "scratch", nullptr);
  ASSERT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition) << result.status();
  EXPECT_THAT(std::string(result.status().message()), HasSubstr((dir_ / "outside.h").string()));
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("not in the key"));
}

TEST_F(ModuleBuildTest, ACompileErrorIsInvalidArgumentWithNvccsLog) {
  CompileJob job = Job();
  job.source += "this is not C++;\n";
  absl::StatusOr<CompileResult> result = BuildModule(job, dir_ / "scratch", nullptr);
  ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << result.status();
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("the compile of __jitd_module__.cu failed"));
  EXPECT_THAT(NvrtcLogOf(result.status()).value_or(""), HasSubstr("__jitd_module__.cu"));
}

TEST_F(ModuleBuildTest, AMissingExportIsRefusedAndAPassedDeadlineKillsTheBuild) {
  CompileJob job = Job();
  job.name_expressions.push_back("absent");
  absl::StatusOr<CompileResult> missing = BuildModule(job, dir_ / "scratch", nullptr);
  ASSERT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition) << missing.status();
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("does not export __tvm_ffi_absent"));

  job = Job();
  job.timeout = std::chrono::milliseconds(1);
  absl::StatusOr<CompileResult> late = BuildModule(job, dir_ / "scratch", nullptr);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();

  std::atomic<bool> cancel{true};
  absl::StatusOr<CompileResult> cancelled = BuildModule(Job(), dir_ / "scratch", &cancel);
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled) << cancelled.status();
}

}  // namespace
}  // namespace jitd::compiler
