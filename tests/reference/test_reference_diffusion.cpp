// modulate_scale_shift and residual_gate_add on inputs small enough to check
// by hand, including the cases where one missing R (a fused step) shows.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "jitd/reference.h"

namespace jitd::reference {
namespace {

template <typename T>
std::vector<T> of(std::initializer_list<float> values) {
  std::vector<T> out;
  for (const float v : values) {
    out.push_back(round_to<T>(v));
    EXPECT_EQ(to_float(out.back()), v) << "test input not exact in T";
  }
  return out;
}

template <typename T>
std::vector<float> widen(const std::vector<T>& values) {
  std::vector<float> out;
  for (const T v : values) out.push_back(to_float(v));
  return out;
}

TEST(ReferenceModulateScaleShift, BroadcastsScaleAndShiftOverSeq) {
  // batch 1, seq 2, dim 2; 1 + scale = [1.5, 0].
  const auto x = of<Bf16>({1.0f, 2.0f, 3.0f, -1.5f});
  const auto scale = of<Bf16>({0.5f, -1.0f});
  const auto shift = of<Bf16>({0.25f, 1.0f});
  const auto out = modulate_scale_shift<Bf16>(x, scale, shift, 1, 2, 2);
  EXPECT_EQ(widen(out), (std::vector<float>{1.75f, 1.0f, 4.75f, 1.0f}));
}

TEST(ReferenceModulateScaleShift, IndexesScaleAndShiftByBatch) {
  // batch 2, seq 1, dim 1: each batch has its own scale and shift.
  const auto x = of<Fp16>({2.0f, 2.0f});
  const auto scale = of<Fp16>({1.0f, 3.0f});
  const auto shift = of<Fp16>({0.5f, -1.0f});
  EXPECT_EQ(widen(modulate_scale_shift<Fp16>(x, scale, shift, 2, 1, 1)), (std::vector<float>{4.5f, 7.0f}));
}

TEST(ReferenceModulateScaleShift, RoundsTheProductBeforeAddingShift) {
  // bf16: x = 1 + 2^-7, 1 + scale = 1 + 2^-6. x * (1 + scale) = 1 + 3 * 2^-7 + 2^-13
  // rounds to 1 + 3 * 2^-7; minus 1 gives 3 * 2^-7. Fused it would keep the
  // 2^-13 (193 * 2^-13 is a bf16).
  const auto out =
      modulate_scale_shift<Bf16>(of<Bf16>({1.0078125f}), of<Bf16>({0.015625f}), of<Bf16>({-1.0f}), 1, 1, 1);
  EXPECT_EQ(to_float(out[0]), 0.0234375f);
}

TEST(ReferenceModulateScaleShift, RoundsOnePlusScaleBeforeMultiplying) {
  // fp16: 1 + 3 * 2^-12 rounds to 1 + 2^-10. 1.5 * (1 + 2^-10) = 1.5 + 1.5 * 2^-10 is
  // a tie that goes to the even 1.5 + 2^-9; minus 1.5 gives 2^-9. Unrounded,
  // 1.5 * (1 + 0.75 * 2^-10) rounds to 1.5 + 2^-10 and the result is 2^-10.
  const auto out =
      modulate_scale_shift<Fp16>(of<Fp16>({1.5f}), of<Fp16>({0.000732421875f}), of<Fp16>({-1.5f}), 1, 1, 1);
  EXPECT_EQ(to_float(out[0]), std::ldexp(1.0f, -9));
}

TEST(ReferenceModulateScaleShift, RejectsMismatchedShapes) {
  const auto v = of<Bf16>({1.0f, 2.0f});
  EXPECT_THROW(modulate_scale_shift<Bf16>(v, v, v, 1, 1, 1), std::invalid_argument);
}

TEST(ReferenceResidualGateAdd, FullGateIsPerElement) {
  const auto residual = of<Bf16>({1.0f, 1.0f, 2.0f, 2.0f});
  const auto update = of<Bf16>({1.0f, 2.0f, 3.0f, 4.0f});
  const auto gate = of<Bf16>({2.0f, 0.5f, -1.0f, 0.25f});
  EXPECT_EQ(widen(residual_gate_add<Bf16>(residual, update, gate, 2, 2, false)),
            (std::vector<float>{3.0f, 2.0f, -1.0f, 3.0f}));
}

TEST(ReferenceResidualGateAdd, BroadcastGateIsPerColumn) {
  const auto residual = of<Fp16>({1.0f, 1.0f, 2.0f, 2.0f});
  const auto update = of<Fp16>({1.0f, 2.0f, 3.0f, 4.0f});
  const auto gate = of<Fp16>({2.0f, 0.5f});
  EXPECT_EQ(widen(residual_gate_add<Fp16>(residual, update, gate, 2, 2, true)),
            (std::vector<float>{3.0f, 2.0f, 8.0f, 4.0f}));
}

TEST(ReferenceResidualGateAdd, RoundsTheGatedUpdateBeforeAdding) {
  // Same numbers as the modulate case: (1 + 2^-7)(1 + 2^-6) rounds to
  // 1 + 3 * 2^-7 in bf16 before the residual -1 is added.
  const auto out =
      residual_gate_add<Bf16>(of<Bf16>({-1.0f}), of<Bf16>({1.0078125f}), of<Bf16>({1.015625f}), 1, 1, false);
  EXPECT_EQ(to_float(out[0]), 0.0234375f);
}

TEST(ReferenceResidualGateAdd, RejectsAFullGateWhenBroadcastIsAsked) {
  const auto v = of<Bf16>({1.0f, 2.0f, 3.0f, 4.0f});
  EXPECT_THROW(residual_gate_add<Bf16>(v, v, v, 2, 2, true), std::invalid_argument);
}

}  // namespace
}  // namespace jitd::reference
