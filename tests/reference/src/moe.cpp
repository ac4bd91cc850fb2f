// References for moe.align_block_size, moe.align_single_token and moe.topk_sum.
#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "check.h"
#include "jitd/reference.h"

namespace jitd::reference {
namespace {

constexpr std::size_t kSingleTokenMaxTopk = 32;

std::int64_t padded_count(std::int64_t count, std::int32_t block_size) {
  return (count + block_size - 1) / block_size * block_size;
}

}  // namespace

std::int64_t align_max_padded(std::int64_t numel, std::int32_t num_experts, std::int32_t block_size) {
  detail::require(block_size > 0, "align: block_size must be positive");
  detail::require(numel >= 0 && num_experts >= 0, "align: negative size");
  return numel + static_cast<std::int64_t>(num_experts) * (block_size - 1);
}

std::int64_t align_expert_blocks(std::int64_t numel, std::int32_t num_experts, std::int32_t block_size) {
  return (align_max_padded(numel, num_experts, block_size) + block_size - 1) / block_size;
}

MoeAlignment align_block_size(std::span<const std::int32_t> topk_ids, std::int32_t num_experts,
                              std::int32_t block_size) {
  const auto numel = static_cast<std::int64_t>(topk_ids.size());
  const std::int64_t max_pad = align_max_padded(numel, num_experts, block_size);

  // c_e, p_e, o_e exactly as KERNELS.md defines them.
  std::vector<std::int64_t> count(static_cast<std::size_t>(num_experts), 0);
  for (const std::int32_t e : topk_ids) {
    if (e >= 0 && e < num_experts) ++count[static_cast<std::size_t>(e)];
  }
  std::vector<std::int64_t> offset(static_cast<std::size_t>(num_experts), 0);
  std::int64_t total = 0;
  for (std::size_t e = 0; e < count.size(); ++e) {
    offset[e] = total;
    total += padded_count(count[e], block_size);
  }

  MoeAlignment out;
  out.num_tokens_post_pad = static_cast<std::int32_t>(total);
  out.sorted_token_ids.assign(static_cast<std::size_t>(max_pad), static_cast<std::int32_t>(numel));
  std::vector<std::int64_t> placed(count.size(), 0);
  for (std::int64_t i = 0; i < numel; ++i) {  // ascending i within each expert
    const std::int32_t e = topk_ids[static_cast<std::size_t>(i)];
    if (e < 0 || e >= num_experts) continue;
    const auto ue = static_cast<std::size_t>(e);
    out.sorted_token_ids[static_cast<std::size_t>(offset[ue] + placed[ue]++)] = static_cast<std::int32_t>(i);
  }

  out.expert_ids.assign(static_cast<std::size_t>(align_expert_blocks(numel, num_experts, block_size)), -1);
  for (std::size_t e = 0; e < count.size(); ++e) {
    const std::int64_t end = offset[e] + padded_count(count[e], block_size);
    for (std::int64_t pos = offset[e]; pos < end; pos += block_size) {
      out.expert_ids[static_cast<std::size_t>(pos / block_size)] = static_cast<std::int32_t>(e);
    }
  }
  return out;
}

MoeAlignment align_single_token(std::span<const std::int32_t> topk_ids, std::int32_t block_size) {
  detail::require(block_size > 0, "align_single_token: block_size must be positive");
  detail::require(topk_ids.size() <= kSingleTokenMaxTopk, "align_single_token: topk > 32");
  const auto topk = static_cast<std::int32_t>(topk_ids.size());

  // (id, k) of the ids that count, in ascending id order: entry k goes to
  // rank(k) * block_size.
  std::vector<std::pair<std::int32_t, std::int32_t>> ranked;
  for (std::int32_t k = 0; k < topk; ++k) {
    if (topk_ids[static_cast<std::size_t>(k)] >= 0) ranked.emplace_back(topk_ids[static_cast<std::size_t>(k)], k);
  }
  std::sort(ranked.begin(), ranked.end());

  MoeAlignment out;
  out.num_tokens_post_pad = static_cast<std::int32_t>(ranked.size()) * block_size;
  out.sorted_token_ids.assign(static_cast<std::size_t>(topk) * static_cast<std::size_t>(block_size), topk);
  out.expert_ids.assign(static_cast<std::size_t>(topk), -1);
  for (std::size_t rank = 0; rank < ranked.size(); ++rank) {
    out.sorted_token_ids[rank * static_cast<std::size_t>(block_size)] = ranked[rank].second;
    out.expert_ids[rank] = ranked[rank].first;
  }
  return out;
}

template <typename T>
std::vector<T> topk_sum(std::span<const T> in, std::int64_t rows, std::int32_t topk, std::int64_t dim) {
  detail::require(rows >= 0 && dim >= 0, "topk_sum: negative shape");
  detail::require_size(in.size(), rows * std::max<std::int32_t>(topk, 0) * dim,
                       "topk_sum: in is not [rows, topk, dim]");
  std::vector<T> out(static_cast<std::size_t>(rows * dim));
  for (std::int64_t m = 0; m < rows; ++m) {
    for (std::int64_t k = 0; k < dim; ++k) {
      float acc = 0.0f;
      for (std::int32_t j = 0; j < topk; ++j) {
        const float v = to_float(in[static_cast<std::size_t>((m * topk + j) * dim + k)]);
        acc = j == 0 ? v : acc + v;
      }
      out[static_cast<std::size_t>(m * dim + k)] = round_to<T>(acc);
    }
  }
  return out;
}

template std::vector<Bf16> topk_sum<Bf16>(std::span<const Bf16>, std::int64_t, std::int32_t, std::int64_t);
template std::vector<Fp16> topk_sum<Fp16>(std::span<const Fp16>, std::int64_t, std::int32_t, std::int64_t);
template std::vector<float> topk_sum<float>(std::span<const float>, std::int64_t, std::int32_t, std::int64_t);

}  // namespace jitd::reference
