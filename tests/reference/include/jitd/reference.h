// CPU references for the kernels of KERNELS.md.
//
// Each function is the formula of KERNELS.md written out in plain C++, one
// element at a time, with the same rounding steps: fp32 arithmetic, and R(v),
// fp32 -> T round-to-nearest-even, exactly where the formula says R. Tests
// compare GPU results with these bit for bit (or, where KERNELS.md allows a
// tolerance, with the ulp helpers below).
//
// Host-side bf16 and fp16 are bit patterns (uint16_t storage); conversions are
// done on the bits, so the results do not depend on the host compiler's or
// CPU's half-precision support. The library is compiled with
// -ffp-contract=off: a fused multiply-add would round once where a formula
// rounds twice.
//
// Preconditions (span sizes that do not match the shape, block_size <= 0, ...)
// are programming errors of the caller and throw std::invalid_argument.
// Thread-safe: no function keeps state.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace jitd::reference {

// ---------------------------------------------------------------- dtypes

// bfloat16 / IEEE binary16 as stored on the GPU: the 16 bits, nothing else.
struct Bf16 {
  std::uint16_t bits = 0;
  friend bool operator==(Bf16, Bf16) = default;
};
struct Fp16 {
  std::uint16_t bits = 0;
  friend bool operator==(Fp16, Fp16) = default;
};

// What the GPU's cvt.rn.bf16.f32 / cvt.rn.f16.f32 (and so __float2bfloat16_rn,
// __float2half_rn) return for any NaN input: the canonical quiet NaN, sign
// dropped, payload dropped.
inline constexpr std::uint16_t kCanonicalNanBits = 0x7fff;

// R(v) for T = bf16 / fp16: round-to-nearest-even; values past the largest
// finite one round to +-inf (as RNE does: 65520 becomes fp16 inf); subnormal
// results are kept, not flushed; NaN becomes kCanonicalNanBits.
Bf16 bf16_from_float(float v);
Fp16 fp16_from_float(float v);

// Exact widening to fp32 (NaN payloads are kept).
float to_float(Bf16 v);
float to_float(Fp16 v);
inline float to_float(float v) { return v; }

// R(v) for T in {Bf16, Fp16, float}; identity for float.
template <typename T>
T round_to(float v);
template <>
inline Bf16 round_to<Bf16>(float v) {
  return bf16_from_float(v);
}
template <>
inline Fp16 round_to<Fp16>(float v) {
  return fp16_from_float(v);
}
template <>
inline float round_to<float>(float v) {
  return v;
}

// Bit equality; for float too (so -0.0f != 0.0f, and NaN == NaN with the
// same bits).
bool same_bits(Bf16 a, Bf16 b);
bool same_bits(Fp16 a, Fp16 b);
bool same_bits(float a, float b);

// Distance in units in the last place between two values of one type: how
// many representable values lie between them (+0 and -0 are 0 apart). A NaN
// on either side gives UINT64_MAX unless both are NaN (then 0).
std::uint64_t ulp_distance(Bf16 a, Bf16 b);
std::uint64_t ulp_distance(Fp16 a, Fp16 b);
std::uint64_t ulp_distance(float a, float b);

// |got - want| in units of T's spacing at |want| (the spacing of the binade
// holding want, or the subnormal spacing below the smallest normal). For
// checking against the fp64 rmsnorm reference: "within 2 ulp of T" is
// ulp_distance(got, want) <= 2. NaN or inf on either side gives +inf unless
// both are the same non-finite value (then 0).
double ulp_distance(Bf16 got, double want);
double ulp_distance(Fp16 got, double want);
double ulp_distance(float got, double want);

// ---------------------------------------------------------------- kernels
// T is Bf16, Fp16 or float; shapes are row-major, as on the GPU.

// diffusion.modulate_scale_shift: x [batch, seq, dim]; scale, shift [batch, dim].
// out[b,l,d] = R( R( x[b,l,d] * R(1 + scale[b,d]) ) + shift[b,d] )
template <typename T>
std::vector<T> modulate_scale_shift(std::span<const T> x, std::span<const T> scale, std::span<const T> shift,
                                    std::int64_t batch, std::int64_t seq, std::int64_t dim);

// diffusion.residual_gate_add: residual, update [rows, dim]; gate [rows, dim]
// or, with broadcast, [dim].
// out[r,d] = R( residual[r,d] + R( update[r,d] * g ) ), g = gate[r,d] or gate[d]
template <typename T>
std::vector<T> residual_gate_add(std::span<const T> residual, std::span<const T> update, std::span<const T> gate,
                                 std::int64_t rows, std::int64_t dim, bool broadcast);

// The outputs of moe.align_block_size / moe.align_single_token.
struct MoeAlignment {
  std::vector<std::int32_t> sorted_token_ids;
  std::vector<std::int32_t> expert_ids;
  std::int32_t num_tokens_post_pad = 0;
  friend bool operator==(const MoeAlignment&, const MoeAlignment&) = default;
};

// Buffer sizes the caller allocates for align_block_size:
// max_pad = numel + num_experts * (block_size - 1) entries of sorted_token_ids
// and ceil(max_pad / block_size) of expert_ids.
std::int64_t align_max_padded(std::int64_t numel, std::int32_t num_experts, std::int32_t block_size);
std::int64_t align_expert_blocks(std::int64_t numel, std::int32_t num_experts, std::int32_t block_size);

// moe.align_block_size over the flattened routing topk_ids (numel entries):
// every output entry, padding and tail included (sizes as above). Entries
// outside [0, num_experts) are skipped.
MoeAlignment align_block_size(std::span<const std::int32_t> topk_ids, std::int32_t num_experts,
                              std::int32_t block_size);

// moe.align_single_token for one token's topk (<= 32) distinct ids:
// topk * block_size entries of sorted_token_ids and topk of expert_ids.
// Negative ids are skipped like align_block_size's out-of-range ones.
MoeAlignment align_single_token(std::span<const std::int32_t> topk_ids, std::int32_t block_size);

// moe.topk_sum: in [rows, topk, dim] -> [rows, dim];
// out[m,k] = R( in[m,0,k] + in[m,1,k] + ... ), fp32, ascending j, starting
// from in[m,0,k]; topk <= 0 gives +0.
template <typename T>
std::vector<T> topk_sum(std::span<const T> in, std::int64_t rows, std::int32_t topk, std::int64_t dim);

// The fp32 value of a / (1 + exp(-a)), computed in fp64 and rounded once to
// fp32: the correctly rounded silu for all but (vanishingly rare) inputs whose
// fp64 value sits within 2^-53 of an fp32 tie.
float silu(float a);

// activation.silu_and_mul: in [rows, 2 * dim] -> [rows, dim];
// out[r,d] = R( R(silu(a)) * b ), a = in[r,d], b = in[r,dim+d], the product in fp32.
template <typename T>
std::vector<T> silu_and_mul(std::span<const T> in, std::int64_t rows, std::int64_t dim);

// norm.rmsnorm in fp64, unrounded: x [rows, dim], weight [dim];
// out[r,d] = x[r,d] / sqrt(mean_d(x[r,:]^2) + eps) * weight[d].
// Compare a GPU result with ulp_distance(got, want).
template <typename T>
std::vector<double> rmsnorm(std::span<const T> x, std::span<const T> weight, std::int64_t rows, std::int64_t dim,
                            float eps);

}  // namespace jitd::reference
