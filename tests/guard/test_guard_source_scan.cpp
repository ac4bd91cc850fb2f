// The guard's source check: the two seed misses are found, named and placed;
// correct code, comments, strings and preprocessor lines are not findings;
// the shipped kernels are clean.
#include <gtest/gtest.h>

#include "namespace_guard.h"

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
)").empty());
}

TEST(SourceScan, TopLevelAnonymousNamespaceIsFoundOnItsLine) {
  auto f = CheckSource("late.cu", "#include <x.h>\n\nnamespace {\n__global__ void k() {}\n}\n");
  ASSERT_EQ(f.size(), 1u) << ::testing::PrintToString(Whats(f));
  EXPECT_EQ(f[0].line, 3);
  EXPECT_NE(f[0].what.find("anonymous namespace"), std::string::npos);
}

TEST(SourceScan, PseudoNamespaceIsFoundAndNamed) {
  auto f = CheckSource("m.cu", "namespace sglang_modulate_scale_shift {\n template <typename T> __global__ void k(T*) {}\n}\n");
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

TEST(Guard, ShippedKernelsAreClean) {
  auto tree = manifest::KernelTree::Load(JITD_KERNELS_DIR);
  ASSERT_TRUE(tree.ok()) << tree.status();
  auto f = CheckSources(**tree);
  EXPECT_TRUE(f.empty()) << ::testing::PrintToString(Whats(f));
}

}  // namespace
}  // namespace jitd::guard
