// The options neither a manifest nor a request may give: every one that
// makes NVRTC read (or write) a file, whatever its spelling, refused with
// the reason (a compile reads only the tree's bytes, which are in the key)
// and, in a manifest, the line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "manifest/manifest.h"
#include "testing.h"

namespace jitd::manifest {
namespace {

namespace fs = std::filesystem;
using cache::testing::TempDir;
using ::testing::HasSubstr;

// A manifest with `defaults` as [defaults].options and `kernel` as its kernel's.
std::string ManifestWith(const std::string& defaults, const std::string& kernel = "") {
  return "schema = 1\n[defaults]\noptions = [" + defaults +
         "]\n[[kernel]]\nname = \"t.k\"\nsource = \"k.cu\"\nname_expressions = [\"sglang::k\"]\noptions = [" + kernel +
         "]\n";
}

TEST(ManifestOptions, EveryOptionThatMakesNvrtcReadAFileIsRefusedNamingTheLine) {
  for (const std::string option :
       {"\"-I/ext\"", "\"-I\", \"/ext\"", "\"-I /ext\"", "\"--include-path=/ext\"", "\"--include-path\", \"/ext\"",
        "\"-include\", \"x.h\"", "\"-includex.h\"", "\"--pre-include=x.h\"", "\"-isystem/ext\"", "\"--pch-dir=/tmp\"",
        "\"-pch\"", "\"--use-pch=/tmp/x.pch\"", "\"--create-pch=x.pch\"", "\"--time=/tmp/t.csv\"",
        "\"--fdevice-time-trace=t.json\"", "\"--options-file=/x\"", "\"-Xptxas\", \"--options-file=/x\"",
        "\"--ptxas-options=-o,/tmp/x\""}) {
    for (const bool in_defaults : {true, false}) {
      const std::string text =
          in_defaults ? ManifestWith("\"-std=c++17\",\n" + option) : ManifestWith("", "\n\n" + option);
      auto parsed = Manifest::Parse(text, "dir/kernels.toml");
      ASSERT_FALSE(parsed.ok()) << option;
      EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
      const std::string message(parsed.status().message());
      EXPECT_THAT(message, HasSubstr(in_defaults ? "dir/kernels.toml:4: option '" : "dir/kernels.toml:10: option '"))
          << option;
      EXPECT_THAT(message,
                  HasSubstr(in_defaults ? "' in [defaults] is not allowed" : "' in kernel t.k is not allowed"));
      EXPECT_THAT(message, HasSubstr("a compile reads only the kernel tree's bytes, which are in its key"));
    }
  }
  // Options that read nothing stay the manifest's to give.
  EXPECT_TRUE(
      Manifest::Parse(ManifestWith("\"-std=c++17\", \"--device-int128\", \"-Xptxas=-v\", \"--no-source-include\"",
                                   "\"-DLEVEL=3\", \"--ptxas-options\", \"--warn-on-spills\""),
                      "kernels.toml")
          .ok());
}

TEST(ManifestOptions, ATreeWhoseManifestGivesAnIncludePathIsRefused) {
  TempDir dir;
  const fs::path root = dir.path() / "tree";
  fs::create_directories(root);
  std::ofstream(root / "k.cu") << "namespace sglang {\n__global__ void k() {}\n}\n";
  std::ofstream(root / "kernels.toml") << ManifestWith("\"-I/ext\"");
  const absl::Status status = KernelTree::Load(root).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr((root / "kernels.toml").string() + ":3: option '-I/ext'"));
}

TEST(RequestOptions, EveryOptionThatMakesNvrtcReadAFileIsRefusedSayingWhy) {
  for (const std::string option : {"-I/ext", "-I", "--include-path=/ext", "--include-path", "-include", "-includex.h",
                                   "--pre-include=x.h", "-isystem", "--pch-dir=x", "-use-pch", "--time=t.csv"}) {
    auto canonical = CanonicalRequestOptions({option});
    ASSERT_FALSE(canonical.ok()) << option;
    EXPECT_EQ(canonical.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(canonical.status().message()), HasSubstr("option '" + option + "' is not allowed"));
    EXPECT_THAT(std::string(canonical.status().message()), HasSubstr("put the headers in the tree"));
  }
}

}  // namespace
}  // namespace jitd::manifest
