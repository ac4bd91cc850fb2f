// The params text the cache indexes by: the daemon's resolver, the client's
// fallback and jitd warm all make it with CanonicalParams.
#include <gtest/gtest.h>

#include "jitd/base/kernel_params.h"

namespace jitd {
namespace {

TEST(CanonicalParams, IsSortedKeyEqualsValuePairsJoinedByCommas) {
  EXPECT_EQ(CanonicalParams({{"gate", "full"}, {"dtype", "bf16"}}), "dtype=bf16,gate=full");
  EXPECT_EQ(CanonicalParams({{"dtype", "bf16"}}), "dtype=bf16");
  EXPECT_EQ(CanonicalParams({}), "");
}

TEST(CanonicalParams, SortsTheTextsAsTheDaemonDoes) {
  // "n2=" sorts before "n=" ('2' < '='), although "n" < "n2" as keys; the
  // daemon sorts the texts, and the cache stores what it made.
  EXPECT_EQ(CanonicalParams({{"n", "1"}, {"n2", "2"}}), "n2=2,n=1");
}

}  // namespace
}  // namespace jitd

namespace jitd {
namespace {

TEST(ParseCanonicalParams, ReadsBackWhatCanonicalParamsWrote) {
  const std::map<std::string, std::string> params = {{"gate", "full"}, {"dtype", "bf16"}, {"n2", "x"}, {"n", "y"}};
  EXPECT_EQ(ParseCanonicalParams(CanonicalParams(params)), params);
  EXPECT_EQ(ParseCanonicalParams(""), (std::map<std::string, std::string>{}));
  EXPECT_EQ(ParseCanonicalParams("expr=a=b"), (std::map<std::string, std::string>{{"expr", "a=b"}}));
}

TEST(ParseCanonicalParams, RefusesATextCanonicalParamsWouldNotHaveWritten) {
  EXPECT_EQ(ParseCanonicalParams("gate=full,dtype=bf16"), std::nullopt) << "out of order";
  EXPECT_EQ(ParseCanonicalParams("dtype=bf16,dtype=fp16"), std::nullopt) << "a name twice";
  EXPECT_EQ(ParseCanonicalParams("dtype"), std::nullopt) << "no '='";
  EXPECT_EQ(ParseCanonicalParams("dtype=bf16,"), std::nullopt) << "a trailing comma";
}

}  // namespace
}  // namespace jitd
