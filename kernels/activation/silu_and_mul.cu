// activation.silu_and_mul: the gated activation of SwiGLU MLPs.
//
//   a = in[r,d], b = in[r,dim+d]
//   out[r,d] = R( R( a / (1 + exp(-a)) ) * b )
//
// in: [rows, 2*dim], out: [rows, dim].
//
// KERNELS.md asks for 1 ulp of T everywhere and equality on >= 99.9% of
// elements. Both are met by making the fp32 value of silu(a) the correctly
// rounded one, which is what the CPU reference computes (in fp64):
// - PyTorch's own fp32 evaluation, a / (1 + expf(-a)), is up to 3 fp32 ulps
//   off (4.3% of all finite fp32 inputs are off at all), and returns -0 for
//   a < -88.7, where expf(-a) overflows although silu(a) is a normal fp32 down
//   to a = -91.7. When such an error flips the inner R, the output moves by up
//   to 2 ulp of T once multiplied by b. (__expf, ex2.approx-based, is worse
//   still.) Measured on the H200: eager F.silu(a) * b vs this reference, on
//   N(0, 9) inputs: fp16 0.016% of outputs differ, by up to 2 ulp; fp32 31%,
//   by up to 4 ulp; over every bf16 a, 17 outputs are hundreds of ulps off.
// - So silu is evaluated in fp64 (exp, add, divide, one rounding to fp32)
//   whenever that could matter: always for T = float, and for bf16/fp16 only
//   when the fast fp32 value is zero or subnormal, or lies within kGuardUlps
//   fp32 ulps of a rounding boundary of T, where a few ulps of error could
//   change R. Everywhere else the fast value rounds to the same T as the
//   exact one. The output is bit-identical to the all-fp64 evaluation (checked
//   on the H200 over every finite input a for all three types, by
//   tests/gpu/crosscheck_torch.py) at fp32 speed: a fraction of a percent of
//   bf16 and fp16 values take the fp64 path, and a pack of outputs takes it
//   only where one of its values needs it.
// The price is bit-parity with eager PyTorch, which KERNELS.md does not ask of
// this kernel (it does of modulate_scale_shift and residual_gate_add).
#include "common/dtype.cuh"
#include "common/grid.cuh"
#include "common/types.cuh"
#include "common/vec.cuh"

namespace sglang::activation {

// a / (1 + exp(-a)) in fp64, rounded once to fp32. fp64 exp is within 1 ulp
// of fp64 and does not overflow before the result is 0 in fp32, so this is
// the correctly rounded fp32 silu except where the fp64 value falls within
// 2^-50 relative of an fp32 tie.
__device__ __forceinline__ float silu_fp64(float a) {
  const double x = a;
  return __double2float_rn(__ddiv_rn(x, __dadd_rn(1.0, exp(-x))));
}

// The fast fp32 evaluation, with a documented error bound (not one that holds
// on one GPU by luck): full-precision expf (at most 2 ulps, CUDA's math
// guide; never __expf), an IEEE add (0.5), and the divide as a reciprocal,
// rcp.approx (at most 1 ulp, PTX ISA) refined by one Newton step to about
// 0.5 ulp, then an IEEE multiply (0.5). The relative error stays under 4.5
// fp32 ulps, so under 8 ulps of the result's binade: inside kGuardUlps.
// Where 1 + exp(-a) overflows (a < -88.7) the value is 0 or NaN, and both
// take the fp64 path. PyTorch divides (IEEE div.rn, a multi-instruction
// sequence); this takes a fifth fewer SASS instructions per pack (261, not
// 336, for bf16), which moves the kernel from 81% to 88% of copy bandwidth
// at 8192 x 14336.
__device__ __forceinline__ float rcp_approx(float d) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
  return r;
}
__device__ __forceinline__ float silu_fast(float a) {
  const float d = __fadd_rn(1.0f, expf(-a));
  const float r0 = rcp_approx(d);
  const float r1 = __fmaf_rn(r0, __fmaf_rn(-d, r0, 1.0f), r0);
  return __fmul_rn(a, r1);
}

// Distance, in fp32 ulps, that the fast value must keep from a rounding
// boundary of T. Since silu's fp32 value depends on a alone, and bf16 and
// fp16 have 2^16 inputs each, the bound is proven by trying them all: with
// 8, every finite bf16 and fp16 a gives the fp64 evaluation's output (the
// H200, crosscheck_torch.py); with 4, two fp16 inputs do not. Each fp64
// fallback costs its whole warp, so the guard is no wider than that: at
// 8192 x 14336 bf16 the kernel (then dividing with div.rn) ran at 81% of copy
// bandwidth with 8, 74% with 16 (kernel_bench.py,
// docs/gpu-runs/2026-12-02-local-path); with the reciprocal, at 88-89% with
// 8 (docs/gpu-runs/2026-12-02-silu-rcp).
inline constexpr int kGuardUlps = 8;

// Whether R(v) to T is the same for every fp32 within kGuardUlps of v. The
// rounding boundaries of bf16 are the fp32 bit patterns whose low 16 bits are
// 0x8000; those of fp16 (normal range) the patterns whose low 13 bits are
// 0x1000. Both lie evenly in bit-pattern order, which is ulp order.
template <typename T>
__device__ __forceinline__ bool rounds_the_same_nearby(float v);

template <>
__device__ __forceinline__ bool rounds_the_same_nearby<float>(float) {
  return false;  // fp32 output keeps every bit: always take the fp64 path
}

template <>
__device__ __forceinline__ bool rounds_the_same_nearby<__nv_bfloat16>(float v) {
  const uint32_t bits = __float_as_uint(v) & 0x7fffffffu;
  if (bits < 0x00800000u) return false;  // zero or subnormal: fp32 silu may have underflowed
  if (bits >= 0x7f800000u) return false;  // inf / NaN: also where 1 + exp(-a) overflowed
  const int low = static_cast<int>(bits & 0xffffu) - 0x8000;
  return low > kGuardUlps || low < -kGuardUlps;
}

template <>
__device__ __forceinline__ bool rounds_the_same_nearby<__half>(float v) {
  const uint32_t bits = __float_as_uint(v) & 0x7fffffffu;
  if (bits < 0x38800000u) return false;  // below fp16's normal range (2^-14)
  if (bits >= 0x7f800000u) return false;
  const int low = static_cast<int>(bits & 0x1fffu) - 0x1000;
  return low > kGuardUlps || low < -kGuardUlps;
}

// The fp32 value of silu(a) that R then rounds: as good as silu_fp64 for T.
template <typename T>
__device__ __forceinline__ float silu(float a) {
  const float fast = silu_fast(a);
  return rounds_the_same_nearby<T>(fast) ? fast : silu_fp64(a);
}

template <typename T>
__device__ __forceinline__ T silu_and_mul(T a, T b) {
  return round_to<T>(__fmul_rn(round_via<T>(silu<T>(to_float(a))), to_float(b)));
}

// A pack's outputs: the fast values first, then, only in a pack where one
// of them is near a rounding boundary, the fp64 values there.
template <typename T>
__device__ __forceinline__ Pack<T> silu_and_mul_pack(const Pack<T>& av, const Pack<T>& bv) {
  constexpr int kSize = Pack<T>::kSize;
  Pack<T> ov;
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int k = 0; k < kSize; ++k) ov.elem[k] = silu_and_mul(av.elem[k], bv.elem[k]);
  } else {
    float s[kSize];
    bool all_fast = true;
#pragma unroll
    for (int k = 0; k < kSize; ++k) {
      s[k] = silu_fast(to_float(av.elem[k]));
      all_fast &= rounds_the_same_nearby<T>(s[k]);
    }
    if (!all_fast) {
#pragma unroll
      for (int k = 0; k < kSize; ++k) {
        if (!rounds_the_same_nearby<T>(s[k])) s[k] = silu_fp64(to_float(av.elem[k]));
      }
    }
#pragma unroll
    for (int k = 0; k < kSize; ++k) ov.elem[k] = round_to<T>(__fmul_rn(round_via<T>(s[k]), to_float(bv.elem[k])));
  }
  return ov;
}

// Output element o = (r, d) reads a at r * 2 * dim + d and b dim further.
template <typename T, typename Index>
__device__ void silu_and_mul_all(T* __restrict__ out, const T* __restrict__ in, int64_t rows, int64_t dim,
                                 bool packed) {
  const int64_t total = rows * dim;
  const Index row = static_cast<Index>(dim);
  if (packed) {
    constexpr int kSize = Pack<T>::kSize;
    const int64_t packs = total / kSize;
    for (int64_t p = grid_thread_index(); p < packs; p += grid_thread_count()) {
      const Index o = static_cast<Index>(p * kSize);
      const Index a_at = o + o / row * row;
      const Pack<T> av = load_pack(in + a_at);
      const Pack<T> bv = load_pack(in + a_at + row);
      store_pack(out + o, silu_and_mul_pack(av, bv));
    }
  } else {
    for (int64_t e = grid_thread_index(); e < total; e += grid_thread_count()) {
      const Index o = static_cast<Index>(e);
      const Index a_at = o + o / row * row;
      out[o] = silu_and_mul(in[a_at], in[a_at + row]);
    }
  }
}

template <typename T>
__global__ void silu_and_mul_kernel(T* __restrict__ out, const T* __restrict__ in, int64_t rows, int64_t dim) {
  if (rows <= 0 || dim <= 0) return;
  const bool packed = row_fits_packs<T>(dim) && all_pack_aligned(out, in);
  // The largest index touched is in's last element, rows * 2 * dim - 1.
  if (rows * 2 * dim <= kMaxIndex32) {
    silu_and_mul_all<T, uint32_t>(out, in, rows, dim, packed);
  } else {
    silu_and_mul_all<T, uint64_t>(out, in, rows, dim, packed);
  }
}

}  // namespace sglang::activation
