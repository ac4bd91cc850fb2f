// diffusion.modulate_scale_shift: adaLN modulation.
//
//   out[b,l,d] = R( R( x[b,l,d] * R(1 + scale[b,d]) ) + shift[b,d] )
//
// x, out: [batch, seq, dim]; scale, shift: [batch, dim], broadcast over seq.
// Bit-exact with eager `x * (1 + scale[:, None]) + shift[:, None]`: each eager
// op computes in fp32 and rounds to T, which is what the three R's are.
#include "common/dtype.cuh"
#include "common/grid.cuh"
#include "common/types.cuh"
#include "common/vec.cuh"

namespace sglang::modulate_scale_shift {

template <typename T>
__device__ __forceinline__ T modulate(T x, T scale, T shift) {
  const float one_plus_scale = round_via<T>(__fadd_rn(1.0f, to_float(scale)));
  const float scaled = round_via<T>(__fmul_rn(to_float(x), one_plus_scale));
  return round_to<T>(__fadd_rn(scaled, to_float(shift)));
}

// Element i of x sits at (b, l, d) = (i / (seq * dim), ., i % dim); its scale
// and shift at b * dim + d.
template <typename T, typename Index>
__device__ void modulate_all(T* __restrict__ out, const T* __restrict__ x, const T* __restrict__ scale,
                             const T* __restrict__ shift, int64_t total, int64_t seq, int64_t dim, bool packed) {
  const Index batch_elems = static_cast<Index>(seq * dim);
  const Index row = static_cast<Index>(dim);
  if (packed) {
    constexpr int kSize = Pack<T>::kSize;
    const int64_t packs = total / kSize;
    for (int64_t p = grid_thread_index(); p < packs; p += grid_thread_count()) {
      const Index i = static_cast<Index>(p * kSize);
      const Index bd = i / batch_elems * row + i % row;
      const Pack<T> xv = load_pack(x + i);
      const Pack<T> sv = load_pack(scale + bd);
      const Pack<T> hv = load_pack(shift + bd);
      Pack<T> ov;
#pragma unroll
      for (int k = 0; k < kSize; ++k) ov.elem[k] = modulate(xv.elem[k], sv.elem[k], hv.elem[k]);
      store_pack(out + i, ov);
    }
  } else {
    for (int64_t e = grid_thread_index(); e < total; e += grid_thread_count()) {
      const Index i = static_cast<Index>(e);
      const Index bd = i / batch_elems * row + i % row;
      out[i] = modulate(x[i], scale[bd], shift[bd]);
    }
  }
}

template <typename T>
__global__ void modulate_scale_shift_kernel(T* __restrict__ out, const T* __restrict__ x, const T* __restrict__ scale,
                                            const T* __restrict__ shift, int64_t batch, int64_t seq, int64_t dim) {
  if (batch <= 0 || seq <= 0 || dim <= 0) return;
  const int64_t total = batch * seq * dim;
  const bool packed = row_fits_packs<T>(dim) && all_pack_aligned(out, x, scale, shift);
  if (total <= kMaxIndex32) {
    modulate_all<T, uint32_t>(out, x, scale, shift, total, seq, dim, packed);
  } else {
    modulate_all<T, uint64_t>(out, x, scale, shift, total, seq, dim, packed);
  }
}

}  // namespace sglang::modulate_scale_shift
