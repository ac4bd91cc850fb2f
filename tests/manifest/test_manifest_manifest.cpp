// kernels.toml parsing: the shipped manifest, instantiation counts, and a
// precise, line-numbered error for every kind of mistake.
#include <gtest/gtest.h>

#include "manifest/manifest.h"

namespace jitd::manifest {
namespace {

constexpr const char* kMinimal = R"toml(
schema = 1
[defaults]
options = ["-std=c++17"]

[[kernel]]
name = "a.k"
source = "a.cu"
name_expressions = ["sglang::k<{dtype}, {n}>"]
  [[kernel.params]]
  name = "dtype"
  type = "dtype"
  values = { bf16 = "__nv_bfloat16", fp16 = "__half" }
  [[kernel.params]]
  name = "n"
  type = "int"
  values = { "1" = "1", "2" = "2", "4" = "4" }
  default = "2"
)toml";

TEST(Manifest, ShippedManifestParsesWithEveryKernelOfTheContract) {
  auto tree = KernelTree::Load(JITD_KERNELS_DIR);
  ASSERT_TRUE(tree.ok()) << tree.status();
  const Manifest& m = (*tree)->manifest();
  for (const char* name : {"diffusion.modulate_scale_shift", "diffusion.residual_gate_add", "moe.align_block_size",
                           "moe.align_single_token", "moe.topk_sum", "activation.silu_and_mul", "norm.rmsnorm"}) {
    EXPECT_NE(m.Find(name), nullptr) << name;
  }
  EXPECT_EQ(m.kernels.size(), 7u);
  EXPECT_EQ(m.kernel_namespace, "sglang");
  size_t total = 0;
  for (const auto& k : m.kernels) total += Manifest::Instantiations(k).size();
  // 2 + 4 + 1 + 1 + 3 + 3 + 12
  EXPECT_EQ(total, 26u);
}

TEST(Manifest, NamespaceIsTheTreesRuleAndSglangWhenNotGiven) {
  auto plain = Manifest::Parse(kMinimal, "k.toml");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->kernel_namespace, "sglang");
  auto team = Manifest::Parse(std::string("namespace = \"team::ops\"\n") + kMinimal, "k.toml");
  ASSERT_TRUE(team.ok()) << team.status();
  EXPECT_EQ(team->kernel_namespace, "team::ops");
  for (const char* bad : {"\"\"", "\"team::\"", "\"1team\"", "\"te am\"", "\"__team\"", "\"::team\"", "3"}) {
    auto parsed = Manifest::Parse(std::string("namespace = ") + bad + "\n" + kMinimal, "k.toml");
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(parsed.status().message().find("k.toml:1"), std::string_view::npos) << parsed.status();
  }
}

TEST(Manifest, InstantiationsAreTheCartesianProductOfParamValues) {
  auto m = Manifest::Parse(kMinimal, "test.toml");
  ASSERT_TRUE(m.ok()) << m.status();
  auto inst = Manifest::Instantiations(m->kernels[0]);
  EXPECT_EQ(inst.size(), 6u);
  EXPECT_EQ(m->kernels[0].params[1].default_value, "2");
}

TEST(Manifest, CloseMatchesFindTyposAndFragments) {
  auto tree = KernelTree::Load(JITD_KERNELS_DIR);
  ASSERT_TRUE(tree.ok());
  const Manifest& m = (*tree)->manifest();
  EXPECT_EQ(m.CloseMatches("diffusion.modulate_scale_shfit").at(0), "diffusion.modulate_scale_shift");
  EXPECT_EQ(m.CloseMatches("rmsnorm").at(0), "norm.rmsnorm");
  EXPECT_TRUE(m.CloseMatches("completely.different.thing.entirely").empty());
}

struct BadCase {
  const char* what;
  std::string toml;
  const char* message;
};

class BadManifest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadManifest, IsRefusedWithTheLineAndTheReason) {
  auto m = Manifest::Parse(GetParam().toml, "kernels.toml");
  ASSERT_FALSE(m.ok()) << GetParam().what;
  EXPECT_TRUE(absl::IsInvalidArgument(m.status())) << m.status();
  EXPECT_NE(m.status().message().find(GetParam().message), std::string_view::npos) << m.status();
  EXPECT_NE(m.status().message().find("kernels.toml:"), std::string_view::npos) << m.status();
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  s.replace(s.find(from), from.size(), to);
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadManifest,
    ::testing::Values(
        BadCase{"syntax", "schema = = 1", ""},
        BadCase{"unknown top key", Replace(kMinimal, "schema = 1", "schema = 1\nkernal = 2"), "unknown key 'kernal'"},
        BadCase{"unknown kernel key", Replace(kMinimal, "source = \"a.cu\"", "source = \"a.cu\"\nsorce = 1"),
                "unknown key 'sorce'"},
        BadCase{"wrong type", Replace(kMinimal, "source = \"a.cu\"", "source = 3"), "must be a string"},
        BadCase{"missing source", Replace(kMinimal, "source = \"a.cu\"", ""), "needs 'source'"},
        BadCase{"escaping source", Replace(kMinimal, "a.cu", "../../etc/passwd"), "inside the kernels directory"},
        BadCase{"placeholder without param", Replace(kMinimal, "{n}>", "{m}>"), "'{m}'"},
        BadCase{"unused param", Replace(kMinimal, ", {n}>", ">"), "not used by any name expression"},
        BadCase{"bad type", Replace(kMinimal, "type = \"int\"", "type = \"float\""), "type must be dtype, enum or int"},
        BadCase{"non-integer int", Replace(kMinimal, "\"4\" = \"4\"", "\"four\" = \"4\""), "not a decimal integer"},
        // Found by tests/fuzz/fuzz_manifest: sorting these threw out_of_range.
        BadCase{"int of 20 digits", Replace(kMinimal, "\"4\" = \"4\"", "\"99999999999999999999\" = \"4\""),
                "more than 9 digits"},
        BadCase{"default not a value", Replace(kMinimal, "default = \"2\"", "default = \"3\""), "default '3'"},
        BadCase{"schema 2", Replace(kMinimal, "schema = 1", "schema = 2"), "schema must be 1"},
        BadCase{"duplicate kernel", std::string(kMinimal) + R"toml(
[[kernel]]
name = "a.k"
source = "b.cu"
name_expressions = ["sglang::b"]
)toml",
                "listed twice"},
        BadCase{"no kernels", "schema = 1", "no [[kernel]]"}));

}  // namespace
}  // namespace jitd::manifest
