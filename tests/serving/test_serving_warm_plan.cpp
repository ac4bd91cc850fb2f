// WarmPlan: the one plan every warm-up runs (the Warm RPC, jitd warm,
// jitd bundle create, the rewarm), over real kernel trees: what `all` and
// specs expand to, a locked tree's all, the archs, and the bounds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "jitd/base/kernel_params.h"
#include "manifest/lock.h"
#include "serving/warm_plan.h"
#include "testing.h"

namespace jitd::serving {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// Two kernels: t.fill with two dtypes, t.one without params.
std::shared_ptr<const manifest::KernelTree> Tree(const fs::path& dir) {
  Write(dir / "kernels.toml", R"toml(
schema = 1
[[kernel]]
name = "t.fill"
source = "k.cu"
name_expressions = ["sglang::t::fill<{dtype}>"]
  [[kernel.params]]
  name = "dtype"
  type = "dtype"
  values = { fp32 = "float", fp64 = "double" }
[[kernel]]
name = "t.one"
source = "k.cu"
name_expressions = ["sglang::t::one"]
)toml");
  Write(dir / "k.cu", "namespace sglang::t {\n}\n");
  auto tree = manifest::KernelTree::Load(dir);
  EXPECT_TRUE(tree.ok()) << tree.status();
  return tree.ok() ? *tree : nullptr;
}

const manifest::Toolchain& Tools() {
  static const manifest::Toolchain t = *manifest::Toolchain::Detect();
  return t;
}

std::unique_ptr<manifest::Resolver> Resolver(std::vector<manifest::ServedTree> trees) {
  auto r = manifest::Resolver::Create(std::move(trees), Tools(), "sm_90");
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : nullptr;
}

std::vector<std::string> Items(const WarmPlan& plan) {
  std::vector<std::string> items;
  for (size_t i = 0; i < plan.size(); ++i) {
    const manifest::KernelRequest r = plan.At(i);
    items.push_back(r.kernel + "{" + CanonicalParams(r.params) + "}@" + r.arch);
  }
  return items;
}

class WarmPlanTest : public ::testing::Test {
 protected:
  cache::testing::TempDir dir_;
};

TEST_F(WarmPlanTest, AllIsEveryInstantiationForEveryArchNamedOnce) {
  auto resolver = Resolver({{"", Tree(dir_.path() / "a"), nullptr}});
  auto plan = WarmPlan::Make({.all = true}, *resolver, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Items(*plan), ElementsAre("t.fill{dtype=fp32}@sm_90", "t.fill{dtype=fp64}@sm_90", "t.one{}@sm_90"))
      << "no arch named: the default";
  plan = WarmPlan::Make({.all = true, .archs = {"sm_90", "sm_100a", "sm_90"}}, *resolver, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->size(), 6u) << "sm_90 twice is one compile";
  EXPECT_THAT(plan->archs(), ElementsAre("sm_90", "sm_100a"));
}

TEST_F(WarmPlanTest, ALockedTreesAllIsItsLockEachEntryForItsOwnArch) {
  auto lock = std::make_shared<manifest::KernelLock>();
  lock->tree = "b";
  lock->entries = {{"t.fill", "dtype=fp64", "sm_100a", std::string(64, 'a')},
                   {"t.one", "", "sm_90", std::string(64, 'b')}};
  auto resolver = Resolver({{"a", Tree(dir_.path() / "a"), nullptr}, {"b", Tree(dir_.path() / "b"), lock}});
  auto plan = WarmPlan::Make({.all = true}, *resolver, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Items(*plan), ElementsAre("b/t.fill{dtype=fp64}@sm_100a", "b/t.one{}@sm_90", "a/t.fill{dtype=fp32}@sm_90",
                                        "a/t.fill{dtype=fp64}@sm_90", "a/t.one{}@sm_90"));
  // Archs named: the lock's entries for those archs only.
  plan = WarmPlan::Make({.all = true, .archs = {"sm_90"}}, *resolver, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Items(*plan), ElementsAre("b/t.one{}@sm_90", "a/t.fill{dtype=fp32}@sm_90", "a/t.fill{dtype=fp64}@sm_90",
                                        "a/t.one{}@sm_90"));
}

TEST_F(WarmPlanTest, ASpecsOwnArchWinsAndTheFleetIsAdded) {
  auto resolver = Resolver({{"", Tree(dir_.path() / "a"), nullptr}});
  WarmAsk ask;
  ask.specs = {{"t.fill", {{"dtype", "fp32"}}, "", {}}, {"t.one", {}, "sm_120", {}}};
  ask.archs = {"sm_90"};
  ask.fleet = true;
  auto plan = WarmPlan::Make(ask, *resolver, {"sm_90", "sm_100a", "compute_90"});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Items(*plan), ElementsAre("t.fill{dtype=fp32}@sm_90", "t.fill{dtype=fp32}@sm_100a",
                                        "t.fill{dtype=fp32}@compute_90", "t.one{}@sm_120"));
}

TEST_F(WarmPlanTest, WhatCannotBeWarmedIsRefusedBeforeAnythingIsExpanded) {
  auto resolver = Resolver({{"", Tree(dir_.path() / "a"), nullptr}});
  auto nothing = WarmPlan::Make({}, *resolver, {});
  ASSERT_TRUE(nothing.ok()) << nothing.status();
  EXPECT_EQ(nothing->size(), 0u) << "an empty warm list warms nothing";
  auto no_fleet = WarmPlan::Make({.all = true, .fleet = true}, *resolver, {});
  EXPECT_TRUE(absl::IsFailedPrecondition(no_fleet.status())) << no_fleet.status();
  auto unknown = WarmPlan::Make({.all = true, .archs = {"sm_9000"}}, *resolver, {});
  EXPECT_TRUE(absl::IsInvalidArgument(unknown.status())) << unknown.status();
  WarmAsk wide;
  wide.all = true;
  wide.archs.assign(WarmPlan::kMaxArchs + 1, "sm_90");
  EXPECT_THAT(std::string(WarmPlan::Make(wide, *resolver, {}).status().message()),
              HasSubstr("at most 64 archs; this one names 65"));
  WarmAsk many;
  many.specs.assign(WarmPlan::kMaxItems / 2 + 1, {"t.one", {}, "", {}});
  many.archs = {"sm_90", "sm_100a"};
  EXPECT_THAT(std::string(WarmPlan::Make(many, *resolver, {}).status().message()),
              HasSubstr("at most 100000 instantiations (specs x archs); this one asks for 100002"));
}

}  // namespace
}  // namespace jitd::serving
