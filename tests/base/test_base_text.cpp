#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "jitd/base/text.h"

namespace jitd::text {
namespace {

using ::testing::ElementsAre;

TEST(Text, CatTakesStringViewsCharactersAndNumbers) {
  const std::string_view view = "view";
  EXPECT_EQ(Cat("a", std::string("b"), view, 'c', 42, -7, size_t{3}), "abviewc42-73");
  std::string out = "x";
  Append(out, "=", 1.5 > 1 ? 1 : 0);
  EXPECT_EQ(out, "x=1");
  EXPECT_EQ(Join(std::vector<std::string>{"a", "b", "c"}, ", "), "a, b, c");
  EXPECT_EQ(Join(std::set<std::string>{}, ", "), "");
}

TEST(Text, InstantiationIsTheOneSpellingOfARequest) {
  EXPECT_EQ(Instantiation("moe.topk_sum", "dtype=bf16", "sm_90"), "moe.topk_sum{dtype=bf16}@sm_90");
  EXPECT_EQ(Instantiation("small.fill", "dtype=fp32", "sm_90", {"-lineinfo"}),
            "small.fill{dtype=fp32}@sm_90[-lineinfo]");
  EXPECT_EQ(Instantiation("k", "", ""), "k{}");
}

TEST(Text, CloseMatchesFindsNearAndContainedNamesClosestFirst) {
  const std::vector<std::string> names = {"norm.rmsnorm", "moe.topk_sum", "moe.align_block_size",
                                          "activation.silu_and_mul"};
  EXPECT_THAT(CloseMatches("rmsnorm", names), ElementsAre("norm.rmsnorm"));
  EXPECT_THAT(CloseMatches("moe.topk_summ", names), ElementsAre("moe.topk_sum"));
  EXPECT_TRUE(CloseMatches("completely.different", names).empty());
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
}

}  // namespace
}  // namespace jitd::text
