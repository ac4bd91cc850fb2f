// Fixed-width integer types for kernel signatures and index arithmetic.
//
// NVRTC has no <cstdint>; libcu++'s <cuda/std/cstdint> works under NVRTC and
// nvcc alike (it needs -I<cuda>/include/cccl ahead of -I<cuda>/include). Under
// NVRTC 13.0 `int64_t` is `long long`, so a lowered name spells it `x`, not the
// `l` of a Linux host build: the mangled names stored with a cubin come from
// NVRTC, never from the host compiler. The names are aliased into `sglang` so
// kernel code does not depend on that header also declaring global ones.
#pragma once

#include <cuda/std/cstdint>

namespace sglang {

using int32_t = ::cuda::std::int32_t;
using int64_t = ::cuda::std::int64_t;
using uint8_t = ::cuda::std::uint8_t;
using uint32_t = ::cuda::std::uint32_t;
using uint64_t = ::cuda::std::uint64_t;
using uintptr_t = ::cuda::std::uintptr_t;

}  // namespace sglang
