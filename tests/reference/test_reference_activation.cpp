// silu and silu_and_mul.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "jitd/reference.h"

namespace jitd::reference {
namespace {

TEST(ReferenceSilu, MatchesTheClosedForm) {
  EXPECT_EQ(silu(0.0f), 0.0f);
  EXPECT_EQ(silu(1.0f), static_cast<float>(1.0 / (1.0 + std::exp(-1.0))));  // 0.7310586
  EXPECT_FLOAT_EQ(silu(1.0f), 0.7310585786f);
  EXPECT_FLOAT_EQ(silu(-1.0f), -0.2689414214f);
  EXPECT_FLOAT_EQ(silu(20.0f), 20.0f);
}

TEST(ReferenceSilu, FollowsTheFormulaAtTheEdges) {
  EXPECT_EQ(silu(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  // -inf / (1 + inf) is NaN, as in PyTorch.
  EXPECT_TRUE(std::isnan(silu(-std::numeric_limits<float>::infinity())));
  // a * exp(a) underflows gracefully into fp32 subnormals.
  EXPECT_LT(silu(-100.0f), 0.0f);
  EXPECT_GT(silu(-100.0f), -std::numeric_limits<float>::min());
  EXPECT_TRUE(std::signbit(silu(-1000.0f)));
}

TEST(ReferenceSiluAndMul, RoundsSiluToTBeforeMultiplying) {
  // bf16, a = 0.5, b = 3: silu(0.5) = 0.3112297 rounds to 159 * 2^-9 = 0.310546875;
  // times 3 is 0.931640625 = 238.5 * 2^-8, a tie that goes to 238 * 2^-8 = 0.9296875.
  // Without the inner R: 0.9336798 rounds to 0.93359375.
  const std::vector<Bf16> in{round_to<Bf16>(0.5f), round_to<Bf16>(3.0f)};
  EXPECT_EQ(to_float(silu_and_mul<Bf16>(in, 1, 1)[0]), 0.9296875f);
}

TEST(ReferenceSiluAndMul, ReadsAFromTheFirstHalfAndBFromTheSecond) {
  // rows 2, dim 2: row r = [a0, a1, b0, b1].
  const std::vector<float> in{0.0f, 1.0f, 5.0f, 2.0f, -1.0f, 20.0f, 3.0f, 0.5f};
  const auto out = silu_and_mul<float>(in, 2, 2);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], silu(1.0f) * 2.0f);
  EXPECT_EQ(out[2], silu(-1.0f) * 3.0f);
  EXPECT_EQ(out[3], silu(20.0f) * 0.5f);
}

}  // namespace
}  // namespace jitd::reference
