// The guard's source check: the two seed misses are found, named and placed;
// correct code, comments, strings and preprocessor lines are not findings;
// files kernels.toml does not register are checked too; the shipped kernels
// are clean.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "guard/namespace_guard.h"

namespace jitd::guard {
namespace {

std::vector<std::string> Whats(const std::vector<Finding>& f) {
  std::vector<std::string> out;
  for (const auto& x : f) out.push_back(x.ToString());
  return out;
}

TEST(SourceScan, NamespaceSglangAndItsSubNamespacesAreClean) {
  EXPECT_TRUE(CheckSource("a.cu", R"(
#include "common/dtype.cuh"
#define KERNEL_THREADS 256
// namespace { } in a comment, "namespace x {" in a string below
namespace sglang {
namespace {  // anonymous, but inside sglang: fine
const char* kText = "namespace evil { int x; }";
}
}
namespace sglang::moe {
template <typename T> __global__ void k(T*) {}
}  // namespace sglang::moe
)")
                  .empty());
}

TEST(SourceScan, TopLevelAnonymousNamespaceIsFoundOnItsLine) {
  auto f = CheckSource("late.cu", "#include <x.h>\n\nnamespace {\n__global__ void k() {}\n}\n");
  ASSERT_EQ(f.size(), 1u) << ::testing::PrintToString(Whats(f));
  EXPECT_EQ(f[0].line, 3);
  EXPECT_NE(f[0].what.find("anonymous namespace"), std::string::npos);
}

TEST(SourceScan, PseudoNamespaceIsFoundAndNamed) {
  auto f = CheckSource("m.cu",
                       "namespace sglang_modulate_scale_shift {\n template <typename T> __global__ void k(T*) {}\n}\n");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].line, 1);
  EXPECT_NE(f[0].what.find("namespace sglang_modulate_scale_shift"), std::string::npos) << f[0].what;
  EXPECT_NE(f[0].what.find("not inside namespace sglang"), std::string::npos);
}

TEST(SourceScan, EveryGlobalDeclarationIsAFindingOfItsOwn) {
  auto f = CheckSource("g.cu", R"(namespace sglang {}
struct Params { int n; };
template <typename T>
__global__ void kernel(T* out) { out[0] = T(); }
using namespace sglang;
static_assert(sizeof(int) == 4, "int");
)");
  ASSERT_EQ(f.size(), 4u) << ::testing::PrintToString(Whats(f));
  EXPECT_EQ(f[0].line, 2);
  EXPECT_NE(f[0].what.find("struct Params"), std::string::npos) << f[0].what;
  EXPECT_EQ(f[1].line, 3);
  EXPECT_NE(f[1].what.find("global scope"), std::string::npos);
  EXPECT_EQ(f[2].line, 5);
  EXPECT_EQ(f[3].line, 6);
}

TEST(SourceScan, NamespaceNamedLikeSglangButNotSglangIsFound) {
  EXPECT_EQ(CheckSource("x.cu", "namespace sglangx { }").size(), 1u);
  EXPECT_EQ(CheckSource("x.cu", "namespace other::sglang { }").size(), 1u);
  EXPECT_EQ(CheckSource("x.cu", "namespace s = sglang;").size(), 1u);
}

// A block comment and a directive continued over lines are not code, even
// where they hold what would be a global declaration or an unmatched brace.
TEST(SourceScan, BlockCommentsAndContinuedDirectivesAreNotCode) {
  const std::string source = R"(/* int global; namespace {
*/
#define SQUARE(x) \
  ((x) * (x)) }
namespace sglang::moe {
__global__ void k(const char* s = "}") {}
}  // namespace sglang::moe
)";
  auto f = CheckSource("c.cu", source);
  EXPECT_TRUE(f.empty()) << ::testing::PrintToString(Whats(f));
}

TEST(SourceScan, GlobalFunctionAndVariableAreFindings) {
  auto f = CheckSource("v.cu",
                       "__device__ float square(float x) { return x * x; }\n"
                       "constexpr int kWarp = 32;\n"
                       "namespace sglang { }\n");
  ASSERT_EQ(f.size(), 2u) << ::testing::PrintToString(Whats(f));
  EXPECT_EQ(f[0].line, 1);
  EXPECT_NE(f[0].what.find("square"), std::string::npos) << f[0].what;
  EXPECT_EQ(f[1].line, 2);
  EXPECT_NE(f[1].what.find("kWarp"), std::string::npos) << f[1].what;
}

TEST(Guard, FindsBothSeedMissesAndNothingElse) {
  auto tree = manifest::KernelTree::Load(std::string(JITD_GUARD_FIXTURES) + "/seed_misses");
  ASSERT_TRUE(tree.ok()) << tree.status();
  auto f = CheckSources(**tree);
  ASSERT_EQ(f.size(), 2u) << ::testing::PrintToString(Whats(f));
  EXPECT_EQ(f[0].file, "diffusion/modulate_scale_shift.cu");
  EXPECT_EQ(f[0].kernel, "diffusion.modulate_scale_shift");
  EXPECT_NE(f[0].what.find("sglang_modulate_scale_shift"), std::string::npos);
  EXPECT_EQ(f[1].file, "diffusion/residual_gate_add.cu");
  EXPECT_EQ(f[1].kernel, "diffusion.residual_gate_add");
  EXPECT_NE(f[1].what.find("anonymous namespace"), std::string::npos);
  EXPECT_EQ(f[1].ToString().rfind("diffusion/residual_gate_add.cu:3: [diffusion.residual_gate_add] ", 0), 0u)
      << f[1].ToString();
}

// A file nobody registered in kernels.toml is never compiled, so only the
// source check can catch it: it is checked like a registered one.
TEST(Guard, UnregisteredSourcesAreCheckedToo) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("jitd-guard-unregistered-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const auto write = [&](const std::string& relative, const std::string& text) {
    std::filesystem::create_directories((dir / relative).parent_path());
    std::ofstream(dir / relative) << text;
  };
  write("kernels.toml", R"(schema = 1
[[kernel]]
name = "moe.scale"
source = "moe/scale.cu"
name_expressions = ["sglang::moe::scale_kernel"]
)");
  write("moe/scale.cu", "namespace sglang::moe {\n__global__ void scale_kernel(float* out) {}\n}\n");
  write("moe/late.cu", "#include \"common/late.cuh\"\nnamespace {\n__global__ void late_kernel() {}\n}\n");
  write("common/late.cuh", "__device__ float late_helper(float x) { return x; }\n");
  auto tree = manifest::KernelTree::Load(dir);
  ASSERT_TRUE(tree.ok()) << tree.status();
  auto f = CheckSources(**tree);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(f.size(), 2u) << ::testing::PrintToString(Whats(f));
  EXPECT_EQ(f[0].file, "common/late.cuh");
  EXPECT_EQ(f[0].kernel, "");
  EXPECT_NE(f[0].what.find("late_helper"), std::string::npos) << f[0].what;
  EXPECT_EQ(f[1].file, "moe/late.cu");
  EXPECT_EQ(f[1].line, 2);
  EXPECT_EQ(f[1].kernel, "");
  EXPECT_NE(f[1].what.find("anonymous namespace"), std::string::npos) << f[1].what;
}

// What the compiler reads differently from plain text: the scan reads it as
// the compiler does (each was a way code at global scope passed as inside
// the namespace; the module check, test_guard_module_check.cpp, catches
// what any other spelling hides).
TEST(SourceScan, DigraphsAreTheBracesTheyStandFor) {
  EXPECT_TRUE(CheckSource("d.cu", "namespace sglang <%\n__global__ void k(int* p) <% p<:0:> = 1; %>\n%>\n").empty());
  auto f =
      CheckSource("d.cu", "namespace sglang {\n%>\nextern \"C\" __global__ void leak() {}\nnamespace sglang <%\n}\n");
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].line, 3);
  EXPECT_NE(f[0].what.find("extern \"C\" __global__ void leak()` is at global scope"), std::string::npos) << f[0].what;
  // "<::" is '<' then "::", not a digraph.
  EXPECT_TRUE(CheckSource("t.cu", "namespace sglang {\ntemplate <typename T> struct S {};\nS<::sglang::S<int>> s;\n}\n")
                  .empty());
}

TEST(SourceScan, ALineCommentEndingInABackslashGoesOnOverTheNextLine) {
  auto f = CheckSource("s.cu", "// spliced \\\nnamespace sglang {\nint leak;\n// spliced \\  \n}\n");
  ASSERT_EQ(f.size(), 1u) << ::testing::PrintToString(Whats(f));
  EXPECT_EQ(f[0].line, 3);
  EXPECT_NE(f[0].what.find("`int leak;` is at global scope"), std::string::npos) << f[0].what;
}

TEST(SourceScan, RawStringsAndDigitSeparatorsAreNotCode) {
  EXPECT_TRUE(CheckSource("r.cu",
                          "namespace sglang {\nconst char* s = R\"x(\n}\" namespace {\n)x\";\n"
                          "constexpr int n = 1'000'000;\n}\n")
                  .empty());
  auto f = CheckSource("r.cu", "namespace sglang {\nconst char* s = R\"(\n)\";\n}\nint leak = 1'0;\n");
  ASSERT_EQ(f.size(), 1u) << ::testing::PrintToString(Whats(f));
  EXPECT_EQ(f[0].line, 5);
}

TEST(SourceScan, ExternCInsideTheNamespaceIsStillACName) {
  auto f = CheckSource("c.cu", "namespace sglang::ops {\nextern \"C\" __global__ void k() {}\n}\n");
  ASSERT_EQ(f.size(), 1u) << ::testing::PrintToString(Whats(f));
  EXPECT_EQ(f[0].line, 2);
  EXPECT_NE(f[0].what.find("in namespace sglang::ops: extern \"C\" gives it a C name"), std::string::npos) << f[0].what;
  EXPECT_TRUE(CheckSource("c.cu", "namespace sglang {\nextern \"C++\" { __device__ int x; }\n}\n").empty());
}

// NVRTC compiles a kernel's source and every file it includes, whatever
// their names: each is scanned.
TEST(Guard, EveryFileACompileReadsIsScannedWhateverItsName) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("jitd-guard-extensions-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const auto write = [&](const std::string& relative, const std::string& text) {
    std::filesystem::create_directories((dir / relative).parent_path());
    std::ofstream(dir / relative) << text;
  };
  write("kernels.toml", R"(schema = 1
[[kernel]]
name = "a.k"
source = "k.cuda"
name_expressions = ["sglang::k"]
)");
  write("k.cuda", "#include \"parts/body.inc\"\nnamespace sglang {\n__global__ void k() {}\n}\n");
  write("parts/body.inc", "#include \"more\"\nint leak_inc;\n");
  write("more", "int leak_more;\n");
  write("README.md", "int not_code;\n");
  auto tree = manifest::KernelTree::Load(dir);
  ASSERT_TRUE(tree.ok()) << tree.status();
  EXPECT_EQ(ScannedFiles(**tree), (std::vector<std::string>{"k.cuda", "more", "parts/body.inc"}));
  auto f = CheckSources(**tree);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(f.size(), 2u) << ::testing::PrintToString(Whats(f));
  EXPECT_EQ(f[0].file, "more");
  EXPECT_EQ(f[1].file, "parts/body.inc");
}

TEST(Guard, ASignatureThatDisagreesWithTheCompiledEntryPointIsSaidArgumentByArgument) {
  // sglang::moe::topk_sum_kernel<__nv_bfloat16>(T*, const T*, int64_t, int32_t, int64_t), as NVRTC lowers it.
  constexpr const char* kLowered = "_ZN6sglang3moe15topk_sum_kernelI13__nv_bfloat16EEvPT_PKS3_xix";
  EXPECT_EQ(SignatureMismatch("(T* out, const T* in, int64_t rows, int32_t topk, int64_t dim)", kLowered), "");
  const std::string why = SignatureMismatch("(T* out, const T* in, int64_t rows, int64_t topk, int64_t dim)", kLowered);
  EXPECT_NE(why.find("passes (pointer, const pointer, int64, int64, int64) but the compiled entry point takes "
                     "(pointer, const pointer, int64, int32, int64)"),
            std::string::npos)
      << why;
  const std::string short_list = SignatureMismatch("(T* out, const T* in)", kLowered);
  EXPECT_NE(short_list.find("takes (pointer, const pointer, int64, int32, int64)"), std::string::npos) << short_list;
}

TEST(Guard, ShippedKernelsAreClean) {
  auto tree = manifest::KernelTree::Load(JITD_KERNELS_DIR);
  ASSERT_TRUE(tree.ok()) << tree.status();
  auto f = CheckSources(**tree);
  EXPECT_TRUE(f.empty()) << ::testing::PrintToString(Whats(f));
}

}  // namespace
}  // namespace jitd::guard
