// align_block_size, align_single_token and topk_sum on hand-worked inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "jitd/reference.h"

namespace jitd::reference {
namespace {

using Ids = std::vector<std::int32_t>;

TEST(ReferenceAlignBlockSize, GroupsByExpertInIndexOrderAndPads) {
  // c = [2, 1, 3] -> p = [4, 4, 4], o = [0, 4, 8], total 12;
  // max_pad = 6 + 3 * 3 = 15, sentinel numel = 6.
  const Ids topk_ids{2, 0, 2, 1, 0, 2};
  const MoeAlignment out = align_block_size(topk_ids, 3, 4);
  EXPECT_EQ(out.num_tokens_post_pad, 12);
  EXPECT_EQ(out.sorted_token_ids, (Ids{1, 4, 6, 6, 3, 6, 6, 6, 0, 2, 5, 6, 6, 6, 6}));
  EXPECT_EQ(out.expert_ids, (Ids{0, 1, 2, -1}));  // ceil(15 / 4) blocks
}

TEST(ReferenceAlignBlockSize, UnusedExpertsTakeNoBlocks) {
  // Experts 1 and 2 are chosen by nobody: c = [1, 0, 0, 2], o = [0, 2, 2, 2].
  const MoeAlignment out = align_block_size(Ids{3, 3, 0}, 4, 2);
  EXPECT_EQ(out.num_tokens_post_pad, 4);
  EXPECT_EQ(out.sorted_token_ids, (Ids{2, 3, 0, 1, 3, 3, 3}));
  EXPECT_EQ(out.expert_ids, (Ids{0, 3, -1, -1}));
}

TEST(ReferenceAlignBlockSize, SkipsIdsOutsideTheExpertRange) {
  // -1 and 5 are not experts of 2; they are neither placed nor counted.
  const MoeAlignment out = align_block_size(Ids{1, -1, 5, 1, 0}, 2, 2);
  EXPECT_EQ(out.num_tokens_post_pad, 4);
  EXPECT_EQ(out.sorted_token_ids, (Ids{4, 5, 0, 3, 5, 5, 5}));
  EXPECT_EQ(out.expert_ids, (Ids{0, 1, -1, -1}));
}

TEST(ReferenceAlignBlockSize, BlockSizeOneNeedsNoPadding) {
  const MoeAlignment out = align_block_size(Ids{1, 0, 1}, 2, 1);
  EXPECT_EQ(out.num_tokens_post_pad, 3);
  EXPECT_EQ(out.sorted_token_ids, (Ids{1, 0, 2}));
  EXPECT_EQ(out.expert_ids, (Ids{0, 1, 1}));
}

TEST(ReferenceAlignBlockSize, ExpertsSpanningSeveralBlocksRepeatInExpertIds) {
  // c = [5, 0, 1], bs 2: p = [6, 0, 2], o = [0, 6, 6], total 8, max_pad 6 + 3 = 9.
  const MoeAlignment out = align_block_size(Ids{0, 0, 2, 0, 0, 0}, 3, 2);
  EXPECT_EQ(out.num_tokens_post_pad, 8);
  EXPECT_EQ(out.sorted_token_ids, (Ids{0, 1, 3, 4, 5, 6, 2, 6, 6}));
  EXPECT_EQ(out.expert_ids, (Ids{0, 0, 0, 2, -1}));
}

TEST(ReferenceAlignBlockSize, EmptyRoutingIsAllPadding) {
  const MoeAlignment out = align_block_size(Ids{}, 2, 4);
  EXPECT_EQ(out.num_tokens_post_pad, 0);
  EXPECT_EQ(out.sorted_token_ids, Ids(6, 0));
  EXPECT_EQ(out.expert_ids, (Ids{-1, -1}));
}

TEST(ReferenceAlignBlockSize, BufferSizesFollowMaxPad) {
  EXPECT_EQ(align_max_padded(6, 3, 4), 15);
  EXPECT_EQ(align_expert_blocks(6, 3, 4), 4);
  EXPECT_EQ(align_expert_blocks(4096 * 8, 256, 128), (4096 * 8 + 256 * 127 + 127) / 128);
  EXPECT_THROW(align_block_size(Ids{0}, 1, 0), std::invalid_argument);
}

TEST(ReferenceAlignSingleToken, PlacesEachIdAtItsRankTimesBlockSize) {
  // ranks: id 5 -> 2, id 1 -> 0, id 3 -> 1; sentinel topk = 3.
  const MoeAlignment out = align_single_token(Ids{5, 1, 3}, 4);
  EXPECT_EQ(out.num_tokens_post_pad, 12);
  EXPECT_EQ(out.sorted_token_ids, (Ids{1, 3, 3, 3, 2, 3, 3, 3, 0, 3, 3, 3}));
  EXPECT_EQ(out.expert_ids, (Ids{1, 3, 5}));
}

TEST(ReferenceAlignSingleToken, SkipsNegativeIdsLikeAlignBlockSize) {
  const MoeAlignment out = align_single_token(Ids{-1, 2}, 2);
  EXPECT_EQ(out.num_tokens_post_pad, 2);
  EXPECT_EQ(out.sorted_token_ids, (Ids{1, 2, 2, 2}));
  EXPECT_EQ(out.expert_ids, (Ids{2, -1}));
  EXPECT_THROW(align_single_token(Ids(33, 0), 2), std::invalid_argument);
}

MoeAlignment cut(MoeAlignment full, std::size_t topk, std::int32_t block_size) {
  full.sorted_token_ids.resize(topk * static_cast<std::size_t>(block_size));
  full.expert_ids.resize(topk);
  return full;
}

TEST(ReferenceAlignSingleToken, EqualsAlignBlockSizeCutToTopkBlocks) {
  std::mt19937 rng(7);
  for (const std::int32_t num_experts : {8, 64, 256}) {
    for (const std::size_t topk : {std::size_t{1}, std::size_t{2}, std::size_t{8}, std::size_t{32}}) {
      if (topk > static_cast<std::size_t>(num_experts)) continue;
      for (const std::int32_t block_size : {1, 16, 64, 128}) {
        for (int trial = 0; trial < 20; ++trial) {
          Ids experts(static_cast<std::size_t>(num_experts));
          std::iota(experts.begin(), experts.end(), 0);
          std::shuffle(experts.begin(), experts.end(), rng);
          const Ids ids(experts.begin(), experts.begin() + static_cast<std::ptrdiff_t>(topk));
          ASSERT_EQ(align_single_token(ids, block_size),
                    cut(align_block_size(ids, num_experts, block_size), topk, block_size))
              << "experts " << num_experts << " topk " << topk << " block " << block_size;
        }
      }
    }
  }
}

TEST(ReferenceTopkSum, SumsInAscendingOrderInFp32) {
  // Same three values, two orders: (1e8 + 1) - 1e8 loses the 1 (fp32 spacing
  // at 1e8 is 8), (1e8 - 1e8) + 1 keeps it.
  EXPECT_EQ(topk_sum<float>(std::vector<float>{1e8f, 1.0f, -1e8f}, 1, 3, 1)[0], 0.0f);
  EXPECT_EQ(topk_sum<float>(std::vector<float>{1e8f, -1e8f, 1.0f}, 1, 3, 1)[0], 1.0f);
}

TEST(ReferenceTopkSum, RoundsToTOnceAtTheEnd) {
  // bf16 1 + 2^-8 + 2^-8: fp32 keeps 1 + 2^-7; rounding after each add would
  // lose both halves (each 1 + 2^-8 is a tie down to 1).
  const std::vector<Bf16> in{round_to<Bf16>(1.0f), round_to<Bf16>(0.00390625f), round_to<Bf16>(0.00390625f)};
  EXPECT_EQ(to_float(topk_sum<Bf16>(in, 1, 3, 1)[0]), 1.0078125f);
}

TEST(ReferenceTopkSum, IndexesRowsTopkAndDim) {
  // rows 2, topk 2, dim 2: in[m, j, k] = 10 m + 4 j + k.
  const std::vector<Fp16> in{round_to<Fp16>(0),  round_to<Fp16>(1),  round_to<Fp16>(4),  round_to<Fp16>(5),
                             round_to<Fp16>(10), round_to<Fp16>(11), round_to<Fp16>(14), round_to<Fp16>(15)};
  const auto out = topk_sum<Fp16>(in, 2, 2, 2);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(to_float(out[0]), 4.0f);
  EXPECT_EQ(to_float(out[1]), 6.0f);
  EXPECT_EQ(to_float(out[2]), 24.0f);
  EXPECT_EQ(to_float(out[3]), 26.0f);
}

TEST(ReferenceTopkSum, KeepsALoneNegativeZeroAndGivesPlusZeroForNoExperts) {
  EXPECT_TRUE(same_bits(topk_sum<float>(std::vector<float>{-0.0f}, 1, 1, 1)[0], -0.0f));
  EXPECT_TRUE(same_bits(topk_sum<float>(std::vector<float>{}, 1, 0, 1)[0], 0.0f));
}

}  // namespace
}  // namespace jitd::reference
