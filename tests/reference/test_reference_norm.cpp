// rmsnorm in fp64.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "jitd/reference.h"

namespace jitd::reference {
namespace {

TEST(ReferenceRmsnorm, NormalisesEachRowByItsRootMeanSquare) {
  // Row [3, 4]: mean square 12.5, rms 5 / sqrt(2); weight [1, 2].
  const std::vector<float> x{3.0f, 4.0f, 1.0f, 1.0f};
  const std::vector<float> w{1.0f, 2.0f};
  const auto out = rmsnorm<float>(x, w, 2, 2, 0.0f);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_DOUBLE_EQ(out[0], 3.0 * std::sqrt(2.0) / 5.0);
  EXPECT_DOUBLE_EQ(out[1], 8.0 * std::sqrt(2.0) / 5.0);
  EXPECT_DOUBLE_EQ(out[2], 1.0);  // second row is its own: rms 1
  EXPECT_DOUBLE_EQ(out[3], 2.0);
}

TEST(ReferenceRmsnorm, AddsEpsInsideTheRoot) {
  const std::vector<Bf16> x{round_to<Bf16>(1.0f), round_to<Bf16>(1.0f)};
  const std::vector<Bf16> w{round_to<Bf16>(1.0f), round_to<Bf16>(1.0f)};
  const auto out = rmsnorm<Bf16>(x, w, 1, 2, 3.0f);  // 1 / sqrt(1 + 3)
  EXPECT_DOUBLE_EQ(out[0], 0.5);
  const std::vector<Bf16> zeros{Bf16{}, Bf16{}};
  EXPECT_DOUBLE_EQ(rmsnorm<Bf16>(zeros, w, 1, 2, 1e-6f)[0], 0.0);
}

TEST(ReferenceRmsnorm, UlpDistanceJudgesARoundedResult) {
  const std::vector<Fp16> x{round_to<Fp16>(3.0f), round_to<Fp16>(4.0f)};
  const std::vector<Fp16> w{round_to<Fp16>(1.0f), round_to<Fp16>(1.0f)};
  const double want = rmsnorm<Fp16>(x, w, 1, 2, 0.0f)[0];  // 0.8485281
  EXPECT_LE(ulp_distance(round_to<Fp16>(static_cast<float>(want)), want), 0.5);
  EXPECT_GT(ulp_distance(round_to<Fp16>(0.85f), want), 2.0);  // 0.85 is 3 fp16 ulps off
}

}  // namespace
}  // namespace jitd::reference
