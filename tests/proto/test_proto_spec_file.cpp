// `jitctl warm --manifest FILE`: the file becomes WarmRequest specs, and
// mistakes are named by file and line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "jitd/spec_file.h"
#include "temp_dir.h"

namespace jitd {
namespace {

using ::testing::HasSubstr;

class WarmManifestTest : public ::testing::Test {
 protected:
  std::filesystem::path Write(const std::string& text) {
    std::ofstream(dir_ / "warm.toml") << text;
    return dir_ / "warm.toml";
  }
  jitd::testing::TempDir dir_;
};

TEST_F(WarmManifestTest, ReadsEverySpecInOrder) {
  absl::StatusOr<std::vector<v1::KernelSpec>> specs = LoadSpecFile(Write(R"(
[[spec]]
kernel = "moe.topk_sum"
params = { dtype = "bf16", k = "8" }
arch = "sm_90a"
options = ["-lineinfo"]

[[spec]]
kernel = "norm.rms"
)"));
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 2u);
  EXPECT_EQ((*specs)[0].kernel(), "moe.topk_sum");
  EXPECT_EQ((*specs)[0].params().at("dtype"), "bf16");
  EXPECT_EQ((*specs)[0].params().at("k"), "8");
  EXPECT_EQ((*specs)[0].arch(), "sm_90a");
  ASSERT_EQ((*specs)[0].options_size(), 1);
  EXPECT_EQ((*specs)[0].options(0), "-lineinfo");
  EXPECT_EQ((*specs)[1].kernel(), "norm.rms");
  EXPECT_TRUE((*specs)[1].arch().empty());
}

TEST_F(WarmManifestTest, MistakesNameTheFileLineAndKey) {
  struct Case {
    const char* text;
    const char* expected;
  };
  for (const Case& c : {Case{"[[spec]]\nkernel = \"a\"\nflavour = \"x\"\n", ":3: unknown key spec[0].flavour"},
                        Case{"[[spec]]\nkernel = 5\n", "spec[0].kernel must be a string"},
                        Case{"[[spec]]\nkernel = \"a\"\nparams = { k = 8 }\n", "spec[0].params.k must be a string"},
                        Case{"[[spec]]\narch = \"sm_90\"\n", "spec[0] has no kernel"},
                        Case{"[[specs]]\nkernel = \"a\"\n", "unknown key specs"},
                        Case{"# nothing\n", "no [[spec]] tables"}, Case{"[[spec]\n", "warm.toml:1"}}) {
    absl::StatusOr<std::vector<v1::KernelSpec>> specs = LoadSpecFile(Write(c.text));
    EXPECT_EQ(specs.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(std::string(specs.status().message()), HasSubstr(c.expected)) << c.text;
  }
}

TEST_F(WarmManifestTest, MissingFileIsNotFound) {
  EXPECT_EQ(LoadSpecFile(dir_ / "absent.toml").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace jitd
