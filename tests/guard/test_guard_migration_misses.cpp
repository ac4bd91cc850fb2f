// The guard against each tree's own namespace rule, and the ways a
// namespace migration misses code beyond the two seed misses: extern "C",
// a using-directive, namespace macros, a primary template left global while
// its specialisation moved, and a header two trees share. Each shape has a
// fixture tree under fixtures/ and is found with its file, line and remedy.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "guard/namespace_guard.h"

namespace jitd::guard {
namespace {

std::vector<std::string> Strings(const std::vector<Finding>& f) {
  std::vector<std::string> out;
  for (const auto& x : f) out.push_back(x.ToString());
  return out;
}

bool Has(const Finding& f, const std::string& text) { return f.what.find(text) != std::string::npos; }

std::shared_ptr<const manifest::KernelTree> Fixture(const std::string& name) {
  auto tree = manifest::KernelTree::Load(std::string(JITD_GUARD_FIXTURES) + "/" + name);
  EXPECT_TRUE(tree.ok()) << tree.status();
  return tree.ok() ? *tree : nullptr;
}

TEST(SourceScan, TheRuleIsTheNamespaceGiven) {
  EXPECT_TRUE(CheckSource("a.cu", "namespace team { }\nnamespace team::x { int y; }\n", "team").empty());
  auto f = CheckSource("a.cu", "namespace sglang {\nint y;\n}\n", "team");
  ASSERT_EQ(f.size(), 1u) << ::testing::PrintToString(Strings(f));
  EXPECT_EQ(f[0].what, "`namespace sglang` is not inside namespace team (wrap it in namespace team)");
  f = CheckSource("a.cu", "namespace {\n}\nint y;\n", "team");
  ASSERT_EQ(f.size(), 2u) << ::testing::PrintToString(Strings(f));
  EXPECT_TRUE(Has(f[0], "anonymous namespace: what it holds is not in namespace team (wrap it in namespace team)"));
  EXPECT_EQ(f[1].what, "`int y;` is at global scope, outside namespace team (wrap it in namespace team)");
}

TEST(SourceScan, ANestedRuleTakesTheNestedAndTheQualifiedSpelling) {
  const std::string clean = R"(namespace team { namespace ops { int a; } }
namespace team::ops { int b; }
namespace team::ops::detail { int c; }
namespace team { namespace ops::detail { int d; } }
namespace team { }
inline namespace team { namespace ops { } }
)";
  auto f = CheckSource("a.cu", clean, "team::ops");
  EXPECT_TRUE(f.empty()) << ::testing::PrintToString(Strings(f));
  f = CheckSource("b.cu",
                  "namespace team {\nstruct Leak;\nnamespace {}\nnamespace opsx {}\n}\nnamespace team::opsx {}\n",
                  "team::ops");
  ASSERT_EQ(f.size(), 4u) << ::testing::PrintToString(Strings(f));
  EXPECT_EQ(f[0].what,
            "`struct Leak;` is in namespace team, outside namespace team::ops (wrap it in namespace team::ops)");
  EXPECT_EQ(f[1].line, 3);
  EXPECT_TRUE(Has(f[1], "anonymous namespace in namespace team: what it holds is not in namespace team::ops"));
  EXPECT_EQ(
      f[2].what,
      "`namespace opsx` is in namespace team but not inside namespace team::ops (wrap it in namespace team::ops)");
  EXPECT_EQ(f[3].what, "`namespace team::opsx` is not inside namespace team::ops (wrap it in namespace team::ops)");
}

TEST(Guard, EachTreeIsCheckedAgainstItsOwnNamespace) {
  auto tree = Fixture("namespace_rule");
  ASSERT_TRUE(tree);
  auto f = CheckSources(*tree);
  ASSERT_EQ(f.size(), 3u) << ::testing::PrintToString(Strings(f));
  EXPECT_EQ(f[0].ToString(),
            "kernels.toml:19: [ops.legacy] name expression `sglang::ops::legacy_kernel` is not in namespace team::ops "
            "(it must start with team::ops::)");
  EXPECT_EQ(f[1].ToString(),
            "ops/half.cu:4: [ops.half] `struct Config` is in namespace team, outside namespace team::ops (wrap it in "
            "namespace team::ops)");
  EXPECT_EQ(f[2].ToString(),
            "ops/legacy.cu:2: [ops.legacy] `namespace sglang::ops` is not inside namespace team::ops (wrap it in "
            "namespace team::ops)");
}

TEST(SourceScan, ExternCSaysTheKernelHasACNameOutsideTheNamespace) {
  auto f = CheckSource("k.cu", "extern \"C\" __global__ void k(float* out) {}\n");
  ASSERT_EQ(f.size(), 1u) << ::testing::PrintToString(Strings(f));
  EXPECT_EQ(f[0].what,
            "`extern \"C\" __global__ void k(float * out)` is at global scope: extern \"C\" gives it a C name outside "
            "namespace sglang (declare it in namespace sglang without extern \"C\"; a name expression finds it there)");
  // A block is one finding; an extern "C++" block is walked as if it were
  // not there.
  f = CheckSource("k.cu", "extern \"C\" {\nint a;\nint b;\n}\nextern \"C++\" { namespace sglang { int c; } }\n");
  ASSERT_EQ(f.size(), 1u) << ::testing::PrintToString(Strings(f));
  EXPECT_TRUE(Has(f[0],
                  "`extern \"C\" { ... }` block at global scope: extern \"C\" gives what it declares (`int a;`) "
                  "C names outside namespace sglang"))
      << f[0].what;
}

TEST(Guard, ExternCKernelsAndBlocksAreFound) {
  auto tree = Fixture("extern_c");
  ASSERT_TRUE(tree);
  auto f = CheckSources(*tree);
  ASSERT_EQ(f.size(), 2u) << ::testing::PrintToString(Strings(f));
  EXPECT_EQ(f[0].file, "activation/silu.cu");
  EXPECT_EQ(f[0].line, 11);
  EXPECT_EQ(f[0].kernel, "activation.silu");
  EXPECT_TRUE(Has(f[0], "extern \"C\" gives it a C name outside namespace sglang")) << f[0].what;
  EXPECT_EQ(f[1].file, "common/fast_math.cuh");
  EXPECT_EQ(f[1].line, 4);
  EXPECT_TRUE(Has(f[1], "block at global scope: extern \"C\" gives what it declares")) << f[1].what;
}

TEST(SourceScan, AUsingDirectiveLeavesWhatFollowsGlobal) {
  auto f = CheckSource("u.cu", "namespace sglang { int helper(); }\nusing namespace sglang;\nint kernel();\n");
  ASSERT_EQ(f.size(), 2u) << ::testing::PrintToString(Strings(f));
  EXPECT_EQ(f[0].line, 2);
  EXPECT_EQ(f[0].what,
            "`using namespace sglang;` at global scope only makes names visible: what is defined after it is still "
            "global, outside namespace sglang (wrap the definitions in namespace sglang instead of using it)");
  EXPECT_EQ(f[1].what,
            "`int kernel();` is at global scope, outside namespace sglang (the `using namespace sglang;` on line 2 "
            "does not put it there; wrap it in namespace sglang)");
}

TEST(Guard, UsingNamespaceDoesNotMoveTheKernelIntoIt) {
  auto tree = Fixture("using_namespace");
  ASSERT_TRUE(tree);
  auto f = CheckSources(*tree);
  ASSERT_EQ(f.size(), 2u) << ::testing::PrintToString(Strings(f));
  EXPECT_EQ(f[0].ToString().rfind("norm/rmsnorm.cu:8: [norm.rmsnorm] `using namespace sglang::norm;` at global", 0), 0u)
      << f[0].ToString();
  EXPECT_EQ(f[1].line, 10);
  EXPECT_TRUE(Has(f[1], "rmsnorm_kernel")) << f[1].what;
  EXPECT_TRUE(Has(f[1], "the `using namespace sglang::norm;` on line 8 does not put it there")) << f[1].what;
}

// A namespace opened and closed by macros is said to be one, at the
// #define and at each use, and the kernel between is not misread as global.
TEST(SourceScan, NamespaceMacrosAreReportedNotMisread) {
  const std::string source = R"(#define KERNEL_BLOCK 256
#define CHECK(x) do { if (!(x)) return; } while (0)
#define BEGIN_NS namespace sglang {
#define END_NS }
BEGIN_NS
__global__ void k(float* out) { CHECK(out); out[0] = KERNEL_BLOCK; }
END_NS
)";
  auto f = CheckSource("m.cu", source);
  ASSERT_EQ(f.size(), 4u) << ::testing::PrintToString(Strings(f));
  EXPECT_EQ(f[0].ToString(),
            "m.cu:3: `#define BEGIN_NS namespace sglang {` opens a namespace in a macro: the guard skips preprocessor "
            "lines, so it cannot see which namespace the code after a use is in (write the namespace out)");
  EXPECT_EQ(f[1].line, 4);
  EXPECT_TRUE(Has(f[1], "`#define END_NS }` closes a brace in a macro")) << f[1].what;
  EXPECT_EQ(f[2].ToString(),
            "m.cu:5: `BEGIN_NS` opens a namespace through a macro (defined at m.cu:3): the guard cannot see through "
            "it (write the namespace out)");
  EXPECT_EQ(f[3].line, 7);
  EXPECT_TRUE(Has(f[3], "`END_NS` closes a brace through a macro")) << f[3].what;
}

// A macro that closes the namespace early leaves what follows global, and
// the scan counts the macro's brace to see that.
TEST(SourceScan, AMacroThatClosesTheNamespaceEarlyLeavesWhatFollowsGlobal) {
  auto f = CheckSource("e.cu", "#define END_NS }\nnamespace sglang {\nint a;\nEND_NS\nint leaked;\n");
  ASSERT_EQ(f.size(), 3u) << ::testing::PrintToString(Strings(f));
  EXPECT_EQ(f[0].line, 1);
  EXPECT_EQ(f[1].line, 4);
  EXPECT_EQ(f[2].line, 5);
  EXPECT_TRUE(Has(f[2], "`int leaked;` is at global scope")) << f[2].what;
}

TEST(Guard, NamespaceMacrosAreFoundWhereDefinedAndWhereUsed) {
  auto tree = Fixture("namespace_macros");
  ASSERT_TRUE(tree);
  auto f = CheckSources(*tree);
  ASSERT_EQ(f.size(), 6u) << ::testing::PrintToString(Strings(f));
  EXPECT_EQ(f[0].file, "common/ns.cuh");
  EXPECT_EQ(f[0].line, 5);
  EXPECT_TRUE(Has(f[0], "`#define SGLANG_BEGIN namespace sglang {` opens a namespace in a macro")) << f[0].what;
  EXPECT_EQ(f[1].line, 6);
  EXPECT_TRUE(Has(f[1], "`#define SGLANG_END }` closes a brace in a macro")) << f[1].what;
  EXPECT_EQ(f[2].file, "moe/hidden.cu");
  EXPECT_EQ(f[2].line, 2);
  EXPECT_TRUE(Has(f[2], "`#define OTHER_BEGIN namespace other {` opens a namespace")) << f[2].what;
  EXPECT_EQ(f[3].line, 4);
  EXPECT_TRUE(Has(f[3], "`OTHER_BEGIN` opens a namespace through a macro (defined at moe/hidden.cu:2)")) << f[3].what;
  EXPECT_EQ(f[4].ToString(),
            "moe/topk.cu:4: [moe.topk] `SGLANG_BEGIN` opens a namespace through a macro (defined at "
            "common/ns.cuh:5): the guard cannot see through it (write the namespace out)");
  EXPECT_EQ(f[5].line, 10);
  EXPECT_TRUE(Has(f[5], "`SGLANG_END` closes a brace through a macro (defined at common/ns.cuh:6)")) << f[5].what;
}

TEST(SourceScan, APrimaryTemplateAtGlobalScopeSpecialisedInsideIsSaidToBe) {
  auto f = CheckSource("t.cu", R"(template <class T> struct Traits { static constexpr int kWidth = 1; };
template <class T> struct Unrelated;
namespace sglang {
template <> struct Traits<float> { static constexpr int kWidth = 4; };
}
)");
  ASSERT_EQ(f.size(), 2u) << ::testing::PrintToString(Strings(f));
  EXPECT_EQ(f[0].what,
            "primary template `Traits` is at global scope although specialised in namespace sglang (line 4): move "
            "the primary template into namespace sglang (a specialisation must be in its namespace)");
  EXPECT_TRUE(Has(f[1], "`template<class T> struct Unrelated;` is at global scope")) << f[1].what;
}

TEST(Guard, APrimaryTemplateInAHeaderSpecialisedInAKernelIsFound) {
  auto tree = Fixture("template_specialisation");
  ASSERT_TRUE(tree);
  auto f = CheckSources(*tree);
  ASSERT_EQ(f.size(), 1u) << ::testing::PrintToString(Strings(f));
  EXPECT_EQ(f[0].ToString(),
            "common/traits.cuh:4: primary template `VecTraits` is at global scope although specialised in namespace "
            "sglang (norm/scale.cu:6): move the primary template into namespace sglang (a specialisation must be in "
            "its namespace)");
}

TEST(Guard, AHeaderTwoTreesIncludeIsFoundOncePerPairOfTrees) {
  auto alpha = Fixture("shared_header/alpha");
  auto beta = Fixture("shared_header/beta");
  auto alpha_too = Fixture("shared_header/alpha_too");
  ASSERT_TRUE(alpha && beta && alpha_too);
  // Different rules: one text satisfies at most one. Included through
  // another header and at another path, it is still the same header; a
  // copy no kernel of the other tree includes is not a finding.
  auto f = CheckTreesShareNoHeaders({{"alpha", alpha.get()}, {"beta", beta.get()}});
  ASSERT_EQ(f.size(), 1u) << ::testing::PrintToString(Strings(f));
  EXPECT_EQ(f[0].ToString(),
            "alpha/common/math.cuh: header included by kernels of two trees is byte-identical to beta/lib/math.cuh "
            "(alpha: alpha.scale, namespace alpha; beta: beta.gate, namespace beta): one text can satisfy at most "
            "one tree's namespace rule (give each tree its own header, in its own namespace)");
  // The same rule: still shared code that belongs in one tree.
  f = CheckTreesShareNoHeaders({{"alpha", alpha.get()}, {"alpha_too", alpha_too.get()}});
  ASSERT_EQ(f.size(), 1u) << ::testing::PrintToString(Strings(f));
  EXPECT_EQ(f[0].file, "alpha/common/math.cuh");
  EXPECT_TRUE(Has(f[0], "byte-identical to alpha_too/common/math.cuh")) << f[0].what;
  EXPECT_TRUE(Has(f[0], "shared code, whose copies drift apart; it should live in one tree")) << f[0].what;
  // Three trees: one finding per pair that shares it.
  f = CheckTreesShareNoHeaders({{"alpha", alpha.get()}, {"beta", beta.get()}, {"alpha_too", alpha_too.get()}});
  EXPECT_EQ(f.size(), 3u) << ::testing::PrintToString(Strings(f));
  // One tree alone shares nothing.
  EXPECT_TRUE(CheckTreesShareNoHeaders({{"alpha", alpha.get()}}).empty());
}

}  // namespace
}  // namespace jitd::guard
