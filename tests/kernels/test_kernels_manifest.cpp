// kernels/kernels.toml against KERNELS.md and against the files in kernels/,
// read by jitd_manifest as the daemon reads it (its parser is tested in
// tests/manifest; here the shipped content is).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "kernel_contract.h"
#include "manifest/manifest.h"
#include "shipped_kernels.h"

namespace jitd::kernels_test {
namespace {

using manifest::KernelDef;
using manifest::Manifest;
using manifest::ParamDef;

class KernelManifest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tree = LoadShippedKernels();
    ASSERT_TRUE(tree.ok()) << tree.status();
    tree_ = *std::move(tree);
  }
  const Manifest& manifest() const { return tree_->manifest(); }

  std::shared_ptr<const manifest::KernelTree> tree_;
};

TEST_F(KernelManifest, IsSchemaOneWithTheSevenKernelsOfKernelsMd) {
  EXPECT_EQ(manifest().schema, 1);
  std::set<std::string> names;
  for (const KernelDef& k : manifest().kernels) EXPECT_TRUE(names.insert(k.name).second) << "duplicate " << k.name;
  std::set<std::string> expected;
  for (const ContractKernel& c : contract_kernels()) expected.insert(c.name);
  EXPECT_EQ(names, expected);
}

TEST_F(KernelManifest, EachKernelDeclaresItsContractEntryPointAndParams) {
  for (const ContractKernel& c : contract_kernels()) {
    SCOPED_TRACE(c.name);
    const KernelDef* k = manifest().Find(c.name);
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->name_expressions, std::vector<std::string>{c.name_expression});
    EXPECT_FALSE(k->description.empty());
    EXPECT_FALSE(k->signature.empty()) << "jitctl kernels -l shows it";
    EXPECT_FALSE(k->launch.empty()) << "jitctl kernels -l shows it";
    ASSERT_EQ(k->params.size(), c.params.size());
    for (const ParamDef& p : k->params) {
      SCOPED_TRACE(p.name);
      ASSERT_TRUE(c.params.contains(p.name));
      std::vector<std::string> values;
      for (const auto& [value, text] : p.values) values.push_back(value);
      std::sort(values.begin(), values.end());  // the contract lists them sorted
      EXPECT_EQ(values, c.params.at(p.name));
      const auto text_of = [&](const std::string& value) {
        const auto it = std::find_if(p.values.begin(), p.values.end(), [&](const auto& v) { return v.first == value; });
        return it == p.values.end() ? std::string("(absent)") : it->second;
      };
      if (p.name == "dtype") {
        EXPECT_EQ(p.type, "dtype");
        for (const auto& [value, text] : p.values) EXPECT_EQ(text, contract_dtypes().at(value));
      } else if (p.name == "gate") {
        EXPECT_EQ(p.type, "enum");
        EXPECT_EQ(text_of("full"), "false");
        EXPECT_EQ(text_of("broadcast"), "true");
      } else if (p.name == "threads") {
        EXPECT_EQ(p.type, "int");
        for (const auto& [value, text] : p.values) EXPECT_EQ(value, text);
      }
    }
  }
}

// Resolved by the daemon's Resolver: every placeholder is filled in and every
// entry point is in namespace sglang.
TEST_F(KernelManifest, EveryInstantiationResolvesToNameExpressionsInSglang) {
  auto resolver = ShippedResolver();
  ASSERT_TRUE(resolver.ok()) << resolver.status();
  size_t instantiations = 0;
  for (const KernelDef& k : manifest().kernels) {
    for (const auto& params : Manifest::Instantiations(k)) {
      ++instantiations;
      auto resolved = (*resolver)->Resolve({.kernel = k.name, .params = params, .arch = "", .options = {}});
      ASSERT_TRUE(resolved.ok()) << k.name << ": " << resolved.status();
      ASSERT_EQ(resolved->job.name_expressions.size(), k.name_expressions.size()) << k.name;
      for (const std::string& e : resolved->job.name_expressions) {
        EXPECT_EQ(e.find_first_of("{}"), std::string::npos) << k.name << " " << resolved->params << ": " << e;
        EXPECT_TRUE(e.starts_with("sglang::")) << e;
      }
    }
  }
  EXPECT_EQ(instantiations, 26u);  // 2 + 4 + 1 + 1 + 3 + 3 + 12
}

TEST_F(KernelManifest, EverySourceExistsInsideTheKernelsDirectory) {
  for (const KernelDef& k : manifest().kernels) {
    const std::filesystem::path source = k.source;
    EXPECT_TRUE(source.is_relative() && source.lexically_normal().string().find("..") == std::string::npos)
        << k.name << ": " << k.source;
    EXPECT_NE(tree_->File(k.source), nullptr) << k.name << ": " << k.source;
  }
}

// A kernel file nobody registered is never compiled by a compile-all check:
// the seed's namespace sweep missed exactly such a file.
TEST_F(KernelManifest, EveryKernelSourceFileIsRegistered) {
  std::set<std::string> registered;
  for (const KernelDef& k : manifest().kernels) registered.insert(k.source);
  int seen = 0;
  for (const auto& [relative, content] : tree_->files()) {
    if (std::filesystem::path(relative).extension() != ".cu") continue;
    ++seen;
    EXPECT_TRUE(registered.contains(relative)) << relative << " is not in kernels.toml";
  }
  EXPECT_EQ(seen, 7);
}

TEST_F(KernelManifest, DefaultOptionsPinTheNumericsAndLeaveArchAndIncludesToTheDaemon) {
  const std::vector<std::string>& defaults = manifest().default_options;
  const auto has = [&](const std::string& option) {
    return std::find(defaults.begin(), defaults.end(), option) != defaults.end();
  };
  EXPECT_TRUE(has("-std=c++17"));
  EXPECT_TRUE(has("--ftz=false"));
  EXPECT_TRUE(has("--prec-div=true"));
  EXPECT_TRUE(has("--prec-sqrt=true"));
  std::vector<std::string> all = defaults;
  for (const KernelDef& k : manifest().kernels) all.insert(all.end(), k.options.begin(), k.options.end());
  for (const std::string& option : all) {
    EXPECT_FALSE(option.starts_with("-I") || option.starts_with("--include-path")) << option;
    EXPECT_FALSE(option.starts_with("-arch") || option.starts_with("--gpu-architecture")) << option;
    EXPECT_EQ(option.find("fast_math"), std::string::npos) << option;  // breaks bit-exactness
    EXPECT_FALSE(option.starts_with("-D")) << option;  // a -D would hide a kernel variant from the manifest
  }
}

}  // namespace
}  // namespace jitd::kernels_test
