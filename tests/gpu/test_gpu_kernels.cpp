// The GPU proof of issue 5: every kernel of KERNELS.md, through the whole
// path (the daemon compiles or serves the cubin, jitd's client fetches it,
// loads it with cuModuleLoadData and resolves the entry point by its name
// expression), launched on device buffers and compared with the CPU
// references of tests/reference: bit for bit where KERNELS.md says so,
// within its stated ulps otherwise.
//
// Needs a GPU, its driver, and a running daemon at $JITD_ENDPOINT
// (tests/gpu/run.sh provides both). Without a usable driver every test is
// skipped with the reason, so CI reports them as skipped, never as passed.
//
// Every element-wise case runs twice: with 16-byte-aligned arrays (the
// kernels' vectorised path where the row length allows it) and with every
// array one element off (their scalar path); both must equal the reference.
// Every output array is surrounded by canary bytes that must survive the
// launch (see DeviceArray).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "crosscheck_dump.h"
#include "gpu_session.h"
#include "jitd/base/text.h"
#include "jitd/kernel_launch.h"
#include "jitd/reference.h"
#include "test_inputs.h"

namespace jitd::gpu {
namespace {

using reference::Bf16;
using reference::Fp16;

// Status plumbing for the helpers below, which return absl::Status(Or) so
// that the tests can ASSERT on one value with its message.
#define GPU_TRY(expr)                                \
  do {                                               \
    const absl::Status gpu_try_status = (expr);      \
    if (!gpu_try_status.ok()) return gpu_try_status; \
  } while (false)
#define GPU_CONCAT_INNER(a, b) a##b
#define GPU_CONCAT(a, b) GPU_CONCAT_INNER(a, b)
#define GPU_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                    \
  if (!tmp.ok()) return tmp.status();   \
  lhs = *std::move(tmp)
#define GPU_ASSIGN(lhs, expr) GPU_ASSIGN_IMPL(GPU_CONCAT(gpu_assign_, __LINE__), lhs, expr)

// ---------------------------------------------------------------------------
// Launch wrappers: each spells out one kernel's parameter list exactly as its
// source in kernels/ declares it (T* is a device pointer; int64_t is `long
// long` under NVRTC, int32_t is int), so every argument converts to its
// parameter's type here, and Launch() passes each by address.

// modulate_scale_shift_kernel<T>(T* out, const T* x, const T* scale, const T* shift,
//                                int64_t batch, int64_t seq, int64_t dim)
absl::Status LaunchModulate(const Function& f, LaunchShape s, CUdeviceptr out, CUdeviceptr x, CUdeviceptr scale,
                            CUdeviceptr shift, std::int64_t batch, std::int64_t seq, std::int64_t dim) {
  return Launch(f, s, out, x, scale, shift, batch, seq, dim);
}

// residual_gate_add_kernel<T, kBroadcast>(T* out, const T* residual, const T* update, const T* gate,
//                                         int64_t rows, int64_t dim)
absl::Status LaunchResidual(const Function& f, LaunchShape s, CUdeviceptr out, CUdeviceptr residual, CUdeviceptr update,
                            CUdeviceptr gate, std::int64_t rows, std::int64_t dim) {
  return Launch(f, s, out, residual, update, gate, rows, dim);
}

// align_block_size_kernel(const int32_t* topk_ids, int64_t numel, int32_t num_experts, int32_t block_size,
//                         int32_t* sorted_token_ids, int32_t* expert_ids, int32_t* num_tokens_post_pad)
// Launch: blocks of a power of two from 32 to 1024 threads, at least
// num_experts, a grid of 1 to 64 (the kernel traps otherwise); every grid and
// every block gives the same outputs. threads 0: the clients' rule
// (jitd::AlignBlockSizeThreads).
absl::Status LaunchAlignBlockSize(const Function& f, unsigned grid, unsigned threads, CUdeviceptr topk_ids,
                                  std::int64_t numel, std::int32_t num_experts, std::int32_t block_size,
                                  CUdeviceptr sorted_token_ids, CUdeviceptr expert_ids,
                                  CUdeviceptr num_tokens_post_pad) {
  if (threads == 0) threads = static_cast<unsigned>(jitd::AlignBlockSizeThreads(num_experts, numel));
  return Launch(f, LaunchShape{grid, threads}, topk_ids, numel, num_experts, block_size, sorted_token_ids, expert_ids,
                num_tokens_post_pad);
}

// align_single_token_kernel(const int32_t* topk_ids, int32_t topk, int32_t block_size,
//                           int32_t* sorted_token_ids, int32_t* expert_ids, int32_t* num_tokens_post_pad)
// Launch: one warp.
absl::Status LaunchAlignSingleToken(const Function& f, CUdeviceptr topk_ids, std::int32_t topk, std::int32_t block_size,
                                    CUdeviceptr sorted_token_ids, CUdeviceptr expert_ids,
                                    CUdeviceptr num_tokens_post_pad) {
  return Launch(f, LaunchShape{1, 32}, topk_ids, topk, block_size, sorted_token_ids, expert_ids, num_tokens_post_pad);
}

// topk_sum_kernel<T>(T* out, const T* in, int64_t rows, int32_t topk, int64_t dim)
absl::Status LaunchTopkSum(const Function& f, LaunchShape s, CUdeviceptr out, CUdeviceptr in, std::int64_t rows,
                           std::int32_t topk, std::int64_t dim) {
  return Launch(f, s, out, in, rows, topk, dim);
}

// silu_and_mul_kernel<T>(T* out, const T* in, int64_t rows, int64_t dim)
absl::Status LaunchSiluAndMul(const Function& f, LaunchShape s, CUdeviceptr out, CUdeviceptr in, std::int64_t rows,
                              std::int64_t dim) {
  return Launch(f, s, out, in, rows, dim);
}

// rmsnorm_kernel<T, kThreads>(T* out, const T* x, const T* weight, int64_t rows, int64_t dim, float eps)
// Launch: blockDim.x = kThreads exactly (the kernel traps otherwise), any
// grid (grid-stride over rows).
absl::Status LaunchRmsNorm(const Function& f, unsigned grid, int threads, CUdeviceptr out, CUdeviceptr x,
                           CUdeviceptr weight, std::int64_t rows, std::int64_t dim, float eps) {
  return Launch(f, LaunchShape{grid, static_cast<unsigned>(threads)}, out, x, weight, rows, dim, eps);
}

// ---------------------------------------------------------------------------
// The kernels, as the client asks for them.

enum class Dt { kBf16, kFp16, kFp32 };

const char* DtName(Dt dt) {
  switch (dt) {
    case Dt::kBf16:
      return "bf16";
    case Dt::kFp16:
      return "fp16";
    case Dt::kFp32:
      return "fp32";
  }
  return "?";
}

template <typename T>
constexpr std::int64_t kDtId = std::is_same_v<T, Bf16>   ? 1
                               : std::is_same_v<T, Fp16> ? 2
                                                         : 3;

template <typename T>
absl::StatusOr<Function> Modulate(KernelSession& s, std::vector<std::string> archs = {}) {
  return s.GetFunction(
      {.kernel = "diffusion.modulate_scale_shift", .params = {{"dtype", Dtype<T>::kParam}}, .archs = std::move(archs)},
      text::Cat("sglang::modulate_scale_shift::modulate_scale_shift_kernel<", Dtype<T>::kCudaType, ">"));
}

template <typename T>
absl::StatusOr<Function> Residual(KernelSession& s, bool broadcast) {
  return s.GetFunction({.kernel = "diffusion.residual_gate_add",
                        .params = {{"dtype", Dtype<T>::kParam}, {"gate", broadcast ? "broadcast" : "full"}}},
                       text::Cat("sglang::residual_gate_add::residual_gate_add_kernel<", Dtype<T>::kCudaType, ", ",
                                 broadcast ? "true" : "false", ">"));
}

absl::StatusOr<Function> AlignBlockSize(KernelSession& s) {
  return s.GetFunction({.kernel = "moe.align_block_size"}, "sglang::moe::align_block_size_kernel");
}

absl::StatusOr<Function> AlignSingleToken(KernelSession& s) {
  return s.GetFunction({.kernel = "moe.align_single_token"}, "sglang::moe::align_single_token_kernel");
}

template <typename T>
absl::StatusOr<Function> TopkSum(KernelSession& s) {
  return s.GetFunction({.kernel = "moe.topk_sum", .params = {{"dtype", Dtype<T>::kParam}}},
                       text::Cat("sglang::moe::topk_sum_kernel<", Dtype<T>::kCudaType, ">"));
}

template <typename T>
absl::StatusOr<Function> SiluAndMul(KernelSession& s) {
  return s.GetFunction({.kernel = "activation.silu_and_mul", .params = {{"dtype", Dtype<T>::kParam}}},
                       text::Cat("sglang::activation::silu_and_mul_kernel<", Dtype<T>::kCudaType, ">"));
}

template <typename T>
absl::StatusOr<Function> RmsNorm(KernelSession& s, int threads) {
  return s.GetFunction(
      {.kernel = "norm.rmsnorm", .params = {{"dtype", Dtype<T>::kParam}, {"threads", std::to_string(threads)}}},
      text::Cat("sglang::norm::rmsnorm_kernel<", Dtype<T>::kCudaType, ", ", threads, ">"));
}

// ---------------------------------------------------------------------------
// Comparisons, with messages that show the first differing elements.

std::uint32_t Bits(Bf16 v) { return v.bits; }
std::uint32_t Bits(Fp16 v) { return v.bits; }
std::uint32_t Bits(float v) { return std::bit_cast<std::uint32_t>(v); }

template <typename T>
std::string Show(T v) {
  std::ostringstream out;
  out << "0x" << std::hex << Bits(v) << std::dec << " (" << reference::to_float(v) << ")";
  return out.str();
}

constexpr int kShownDifferences = 5;

template <typename T>
::testing::AssertionResult SameBits(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << got.size() << " elements, the reference has " << want.size();
  }
  std::size_t differing = 0;
  std::ostringstream first;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (reference::same_bits(got[i], want[i])) continue;
    if (differing < kShownDifferences) first << "\n  [" << i << "] got " << Show(got[i]) << ", want " << Show(want[i]);
    ++differing;
  }
  if (differing == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << differing << " of " << got.size() << " elements differ from the reference"
                                       << first.str();
}

::testing::AssertionResult SameInts(const std::vector<std::int32_t>& got, const std::vector<std::int32_t>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << got.size() << " entries, expected " << want.size();
  }
  std::size_t differing = 0;
  std::ostringstream first;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;
    if (differing < kShownDifferences) first << "\n  [" << i << "] got " << got[i] << ", want " << want[i];
    ++differing;
  }
  if (differing == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << differing << " of " << got.size() << " entries differ" << first.str();
}

// KERNELS.md's silu_and_mul bound: within `max_ulps` of T everywhere, and
// bit-equal on at least `min_exact` of the elements.
template <typename T>
::testing::AssertionResult WithinUlps(const std::vector<T>& got, const std::vector<T>& want, std::uint64_t max_ulps,
                                      double min_exact) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << got.size() << " elements, the reference has " << want.size();
  }
  std::size_t inexact = 0;
  std::size_t too_far = 0;
  std::ostringstream first;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (reference::same_bits(got[i], want[i])) continue;
    ++inexact;
    const std::uint64_t ulps = reference::ulp_distance(got[i], want[i]);
    if (ulps > max_ulps) {
      if (too_far < kShownDifferences) {
        first << "\n  [" << i << "] got " << Show(got[i]) << ", want " << Show(want[i]) << ": " << ulps << " ulp";
      }
      ++too_far;
    }
  }
  const double exact = got.empty() ? 1.0 : 1.0 - static_cast<double>(inexact) / static_cast<double>(got.size());
  if (too_far == 0 && exact >= min_exact) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << too_far << " of " << got.size() << " elements more than " << max_ulps
                                       << " ulp off; " << inexact << " not bit-exact (" << 100.0 * exact
                                       << "% exact, at least " << 100.0 * min_exact << "% required)" << first.str();
}

// KERNELS.md's rmsnorm bound against the fp64 reference.
template <typename T>
::testing::AssertionResult WithinUlpsOf(const std::vector<T>& got, const std::vector<double>& want, double max_ulps) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << got.size() << " elements, the reference has " << want.size();
  }
  std::size_t too_far = 0;
  double worst = 0;
  std::ostringstream first;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double ulps = reference::ulp_distance(got[i], want[i]);
    worst = std::max(worst, ulps);
    if (ulps > max_ulps) {
      if (too_far < kShownDifferences) {
        first << "\n  [" << i << "] got " << Show(got[i]) << ", want " << want[i] << ": " << ulps << " ulp";
      }
      ++too_far;
    }
  }
  if (too_far == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << too_far << " of " << got.size() << " elements more than " << max_ulps
                                       << " ulp from the fp64 reference (worst " << worst << ")" << first.str();
}

template <typename T>
std::vector<std::uint16_t> RawBits(const std::vector<T>& v) {
  static_assert(sizeof(T) == 2);
  std::vector<std::uint16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<std::uint16_t>(Bits(v[i]));
  return out;
}

// Alignments every element-wise case runs with: the arrays as allocated
// (16-byte aligned: the vectorised path when the row allows it), and each
// array one element further (the scalar path).
constexpr std::size_t kOffsets[] = {0, 1};

// ---------------------------------------------------------------------------
// diffusion.modulate_scale_shift and diffusion.residual_gate_add: bit-exact
// on KERNELS.md's five shapes, in bf16 and fp16.

struct Shape3 {
  std::int64_t batch, seq, dim;
  std::int64_t numel() const { return batch * seq * dim; }
};
constexpr Shape3 kDiffusionShapes[] = {{1, 4096, 3072}, {1, 512, 3072}, {1, 4608, 3072}, {2, 1024, 3072}, {1, 17, 64}};

std::string ShapeName(Shape3 s) { return text::Cat(s.batch, "x", s.seq, "x", s.dim); }

// The cases crosscheck.py compares with CuPy and eager PyTorch.
bool DumpsModulate(Shape3 s) { return (s.batch == 1 && s.seq == 17) || (s.batch == 2 && s.seq == 1024); }
bool DumpsResidual(Shape3 s, bool broadcast) { return !broadcast && s.batch * s.seq == 2048 && s.dim == 3072; }

template <typename T>
struct ModulateInputs {
  std::vector<T> x, scale, shift;
};

template <typename T>
ModulateInputs<T> MakeModulateInputs(Shape3 s) {
  Rng rng(CaseSeed({1, kDtId<T>, s.batch, s.seq, s.dim}));
  ModulateInputs<T> in;
  in.x = RandomArray<T>(static_cast<std::size_t>(s.numel()), rng);
  in.scale = RandomArray<T>(static_cast<std::size_t>(s.batch * s.dim), rng);
  in.shift = RandomArray<T>(static_cast<std::size_t>(s.batch * s.dim), rng);
  return in;
}

template <typename T>
absl::StatusOr<std::vector<T>> RunModulate(const Function& f, const ModulateInputs<T>& in, Shape3 s, std::size_t offset,
                                           std::optional<LaunchShape> launch = std::nullopt) {
  GPU_ASSIGN(auto x, DeviceArray<T>::Upload(in.x, offset));
  GPU_ASSIGN(auto scale, DeviceArray<T>::Upload(in.scale, offset));
  GPU_ASSIGN(auto shift, DeviceArray<T>::Upload(in.shift, offset));
  GPU_ASSIGN(auto out, DeviceArray<T>::Output(in.x.size(), offset));
  GPU_TRY(LaunchModulate(f, launch.value_or(ElementwiseLaunch(s.numel())), out.ptr(), x.ptr(), scale.ptr(), shift.ptr(),
                         s.batch, s.seq, s.dim));
  return out.Read();
}

template <typename T>
void CheckModulate(KernelSession& session, Shape3 s, std::vector<std::string> archs = {}) {
  absl::StatusOr<Function> f = Modulate<T>(session, std::move(archs));
  ASSERT_TRUE(f.ok()) << f.status();
  const ModulateInputs<T> in = MakeModulateInputs<T>(s);
  const std::vector<T> want = reference::modulate_scale_shift<T>(in.x, in.scale, in.shift, s.batch, s.seq, s.dim);
  for (std::size_t offset : kOffsets) {
    SCOPED_TRACE(text::Cat("arrays ", offset, " element(s) off 16-byte alignment"));
    absl::StatusOr<std::vector<T>> got = RunModulate(*f, in, s, offset);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(SameBits(*got, want));
    if (offset != 0 || !DumpsModulate(s)) continue;
    if (std::optional<std::filesystem::path> dir = DumpDir()) {
      const auto x = RawBits(in.x), scale = RawBits(in.scale), shift = RawBits(in.shift), out = RawBits(*got);
      const absl::Status written =
          WriteDump(*dir, {.name = text::Cat("modulate_scale_shift_", Dtype<T>::kParam, "_", ShapeName(s)),
                           .kernel = "diffusion.modulate_scale_shift",
                           .dtype = Dtype<T>::kParam,
                           .input_shapes = {{s.batch, s.seq, s.dim}, {s.batch, s.dim}, {s.batch, s.dim}},
                           .inputs = {x, scale, shift},
                           .output = out});
      EXPECT_TRUE(written.ok()) << written;
    }
  }
}

template <typename T>
void CheckResidual(KernelSession& session, Shape3 s, bool broadcast) {
  absl::StatusOr<Function> f = Residual<T>(session, broadcast);
  ASSERT_TRUE(f.ok()) << f.status();
  const std::int64_t rows = s.batch * s.seq;
  const std::int64_t dim = s.dim;
  Rng rng(CaseSeed({2, kDtId<T>, rows, dim, broadcast ? 1 : 0}));
  const auto n = static_cast<std::size_t>(rows * dim);
  const std::vector<T> residual = RandomArray<T>(n, rng);
  const std::vector<T> update = RandomArray<T>(n, rng);
  const std::vector<T> gate = RandomArray<T>(broadcast ? static_cast<std::size_t>(dim) : n, rng);
  const std::vector<T> want = reference::residual_gate_add<T>(residual, update, gate, rows, dim, broadcast);
  for (std::size_t offset : kOffsets) {
    SCOPED_TRACE(text::Cat("arrays ", offset, " element(s) off 16-byte alignment"));
    absl::StatusOr<std::vector<T>> got = [&]() -> absl::StatusOr<std::vector<T>> {
      GPU_ASSIGN(auto r, DeviceArray<T>::Upload(residual, offset));
      GPU_ASSIGN(auto u, DeviceArray<T>::Upload(update, offset));
      GPU_ASSIGN(auto g, DeviceArray<T>::Upload(gate, offset));
      GPU_ASSIGN(auto out, DeviceArray<T>::Output(n, offset));
      GPU_TRY(LaunchResidual(*f, ElementwiseLaunch(rows * dim), out.ptr(), r.ptr(), u.ptr(), g.ptr(), rows, dim));
      return out.Read();
    }();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(SameBits(*got, want));
    if (offset != 0 || !DumpsResidual(s, broadcast)) continue;
    if (std::optional<std::filesystem::path> dir = DumpDir()) {
      const auto r = RawBits(residual), u = RawBits(update), g = RawBits(gate), out = RawBits(*got);
      const absl::Status written =
          WriteDump(*dir, {.name = text::Cat("residual_gate_add_full_", Dtype<T>::kParam, "_", rows, "x", dim),
                           .kernel = "diffusion.residual_gate_add",
                           .dtype = Dtype<T>::kParam,
                           .gate = "full",
                           .input_shapes = {{rows, dim}, {rows, dim}, {rows, dim}},
                           .inputs = {r, u, g},
                           .output = out});
      EXPECT_TRUE(written.ok()) << written;
    }
  }
}

struct DiffusionCase {
  Dt dtype;
  Shape3 shape;
};

std::vector<DiffusionCase> DiffusionCases() {
  std::vector<DiffusionCase> cases;
  for (Dt dt : {Dt::kBf16, Dt::kFp16}) {
    for (Shape3 s : kDiffusionShapes) cases.push_back({dt, s});
  }
  return cases;
}

std::string DiffusionCaseName(const ::testing::TestParamInfo<DiffusionCase>& info) {
  return text::Cat(DtName(info.param.dtype), "_", ShapeName(info.param.shape));
}

using ModulateScaleShift = GpuParamTest<DiffusionCase>;

TEST_P(ModulateScaleShift, BitExactWithReference) {
  const DiffusionCase c = GetParam();
  if (c.dtype == Dt::kBf16) CheckModulate<Bf16>(session(), c.shape);
  if (c.dtype == Dt::kFp16) CheckModulate<Fp16>(session(), c.shape);
}

INSTANTIATE_TEST_SUITE_P(Shapes, ModulateScaleShift, ::testing::ValuesIn(DiffusionCases()), DiffusionCaseName);

// Fatbins (KernelSpec::archs): the driver takes the SASS for the GPU when
// the fatbin has it, else JIT-compiles the PTX. Which one it loaded shows
// in the function's PTX version: the PTX's virtual arch (80 for
// compute_80), or the SASS's own (90 for sm_90, on an H200).
using Fatbin = GpuTest;

int PtxVersion(KernelSession& session, std::vector<std::string> archs) {
  absl::StatusOr<Function> f = Modulate<Bf16>(session, std::move(archs));
  if (!f.ok()) {
    ADD_FAILURE() << f.status();
    return -1;
  }
  absl::StatusOr<int> version = FunctionPtxVersion(f->handle);
  if (!version.ok()) ADD_FAILURE() << version.status();
  return version.value_or(-1);
}

TEST_F(Fatbin, WithoutSassForThisGpuThePtxOfTheLowestArchRunsBitExact) {
  const std::vector<std::string> archs = {"sm_80", "sm_100", "compute_80"};
  CheckModulate<Bf16>(session(), {2, 1024, 3072}, archs);
  CheckModulate<Fp16>(session(), {1, 4096, 3072}, archs);
  EXPECT_EQ(PtxVersion(session(), archs), 80) << "loaded through the PTX path";
}

TEST_F(Fatbin, WithSassForThisGpuThatSassIsLoaded) {
  const std::vector<std::string> archs = {"sm_90", "compute_80"};
  CheckModulate<Bf16>(session(), {2, 1024, 3072}, archs);
  EXPECT_EQ(PtxVersion(session(), archs), 90) << "the sm_90 SASS, not the PTX";
}

using ResidualGateAdd = GpuParamTest<DiffusionCase>;

TEST_P(ResidualGateAdd, FullGateBitExactWithReference) {
  const DiffusionCase c = GetParam();
  if (c.dtype == Dt::kBf16) CheckResidual<Bf16>(session(), c.shape, /*broadcast=*/false);
  if (c.dtype == Dt::kFp16) CheckResidual<Fp16>(session(), c.shape, /*broadcast=*/false);
}

TEST_P(ResidualGateAdd, BroadcastGateBitExactWithReference) {
  const DiffusionCase c = GetParam();
  if (c.dtype == Dt::kBf16) CheckResidual<Bf16>(session(), c.shape, /*broadcast=*/true);
  if (c.dtype == Dt::kFp16) CheckResidual<Fp16>(session(), c.shape, /*broadcast=*/true);
}

INSTANTIATE_TEST_SUITE_P(Shapes, ResidualGateAdd, ::testing::ValuesIn(DiffusionCases()), DiffusionCaseName);

// KERNELS.md: element-wise kernels give the same result for any gridDim.x >= 1
// and any blockDim.x that is a multiple of 32 up to 1024.
using ElementwiseLaunchShape = GpuTest;

TEST_F(ElementwiseLaunchShape, AnyGridAndBlockGiveTheSameResult) {
  const Shape3 s{2, 1024, 3072};
  absl::StatusOr<Function> f = Modulate<Bf16>(session());
  ASSERT_TRUE(f.ok()) << f.status();
  const ModulateInputs<Bf16> in = MakeModulateInputs<Bf16>(s);
  const std::vector<Bf16> want = reference::modulate_scale_shift<Bf16>(in.x, in.scale, in.shift, s.batch, s.seq, s.dim);
  // One thread for everything, odd block sizes, partial waves, one 8-element
  // pack per thread (786432 packs / 256), one element per thread.
  const LaunchShape launches[] = {{1, 32},    {1, 1024},   {3, 96},     {7, 992},
                                  {132, 256}, {1000, 512}, {3072, 256}, {24576, 256}};
  for (std::size_t offset : kOffsets) {
    for (LaunchShape launch : launches) {
      SCOPED_TRACE(
          text::Cat("grid ", launch.grid, ", block ", launch.block, ", arrays ", offset, " element(s) off alignment"));
      absl::StatusOr<std::vector<Bf16>> got = RunModulate(*f, in, s, offset, launch);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_TRUE(SameBits(*got, want));
    }
  }
}

// ---------------------------------------------------------------------------
// moe.align_block_size and moe.align_single_token: bit-exact, every output
// entry (padding and tail included).

// Routing for `tokens` tokens: each token's `topk` ids drawn from a random
// subset of the experts (a quarter of them, at least one, are chosen by
// nobody), distinct within the token when the subset is large enough.
std::vector<std::int32_t> MakeRouting(std::int32_t tokens, std::int32_t topk, std::int32_t experts, Rng& rng) {
  const std::int32_t used = std::max(1, experts - std::max(1, experts / 4));
  const std::vector<std::int32_t> subset = DistinctBelow(experts, used, rng);
  std::vector<std::int32_t> ids;
  ids.reserve(static_cast<std::size_t>(tokens) * static_cast<std::size_t>(topk));
  for (std::int32_t t = 0; t < tokens; ++t) {
    if (topk <= used) {
      for (std::int32_t k : DistinctBelow(used, topk, rng)) ids.push_back(subset[static_cast<std::size_t>(k)]);
    } else {
      for (std::int32_t k = 0; k < topk; ++k) ids.push_back(subset[rng.Below(static_cast<std::uint64_t>(used))]);
    }
  }
  return ids;
}

// align_block_size on the GPU, every output entry.
absl::StatusOr<reference::MoeAlignment> RunAlignBlockSize(const Function& f, const std::vector<std::int32_t>& ids,
                                                          std::int32_t experts, std::int32_t block_size, unsigned grid,
                                                          std::size_t sorted_offset = 0, unsigned threads = 0) {
  const auto numel = static_cast<std::int64_t>(ids.size());
  const auto sorted_size = static_cast<std::size_t>(reference::align_max_padded(numel, experts, block_size));
  const auto blocks = static_cast<std::size_t>(reference::align_expert_blocks(numel, experts, block_size));
  GPU_ASSIGN(auto topk_ids, DeviceArray<std::int32_t>::Upload(ids));
  GPU_ASSIGN(auto sorted, DeviceArray<std::int32_t>::Output(sorted_size, sorted_offset));
  GPU_ASSIGN(auto expert_ids, DeviceArray<std::int32_t>::Output(blocks));
  GPU_ASSIGN(auto post_pad, DeviceArray<std::int32_t>::Output(1));
  GPU_TRY(LaunchAlignBlockSize(f, grid, threads, topk_ids.ptr(), numel, experts, block_size, sorted.ptr(),
                               expert_ids.ptr(), post_pad.ptr()));
  reference::MoeAlignment out;
  GPU_ASSIGN(out.sorted_token_ids, sorted.Read());
  GPU_ASSIGN(out.expert_ids, expert_ids.Read());
  GPU_ASSIGN(const std::vector<std::int32_t> total, post_pad.Read());
  out.num_tokens_post_pad = total[0];
  return out;
}

// align_single_token on the GPU: topk * block_size entries of
// sorted_token_ids, topk of expert_ids.
absl::StatusOr<reference::MoeAlignment> RunAlignSingleToken(const Function& f, const std::vector<std::int32_t>& ids,
                                                            std::int32_t block_size) {
  const auto topk = static_cast<std::int32_t>(ids.size());
  GPU_ASSIGN(auto topk_ids, DeviceArray<std::int32_t>::Upload(ids));
  GPU_ASSIGN(auto sorted,
             DeviceArray<std::int32_t>::Output(static_cast<std::size_t>(topk) * static_cast<std::size_t>(block_size)));
  GPU_ASSIGN(auto expert_ids, DeviceArray<std::int32_t>::Output(static_cast<std::size_t>(topk)));
  GPU_ASSIGN(auto post_pad, DeviceArray<std::int32_t>::Output(1));
  GPU_TRY(LaunchAlignSingleToken(f, topk_ids.ptr(), topk, block_size, sorted.ptr(), expert_ids.ptr(), post_pad.ptr()));
  reference::MoeAlignment out;
  GPU_ASSIGN(out.sorted_token_ids, sorted.Read());
  GPU_ASSIGN(out.expert_ids, expert_ids.Read());
  GPU_ASSIGN(const std::vector<std::int32_t> total, post_pad.Read());
  out.num_tokens_post_pad = total[0];
  return out;
}

// KERNELS.md: sorted_token_ids is defined below num_tokens_post_pad only
// (the kernels do not write past it); expert_ids is defined whole.
void ExpectSameAlignment(const reference::MoeAlignment& got, const reference::MoeAlignment& want) {
  EXPECT_EQ(got.num_tokens_post_pad, want.num_tokens_post_pad) << "num_tokens_post_pad";
  const auto written = static_cast<std::size_t>(want.num_tokens_post_pad);
  ASSERT_LE(written, got.sorted_token_ids.size());
  ASSERT_LE(written, want.sorted_token_ids.size());
  const std::vector<std::int32_t> got_sorted(got.sorted_token_ids.begin(), got.sorted_token_ids.begin() + written);
  const std::vector<std::int32_t> want_sorted(want.sorted_token_ids.begin(), want.sorted_token_ids.begin() + written);
  EXPECT_TRUE(SameInts(got_sorted, want_sorted)) << "sorted_token_ids below num_tokens_post_pad";
  EXPECT_TRUE(SameInts(got.expert_ids, want.expert_ids)) << "expert_ids";
}

// The grids each align_block_size case runs at: the one the clients pick
// (jitd::AlignBlockSizeGrid), one block, an odd count (chunks that do not
// divide evenly), and the most the kernel allows (empty chunks at small
// numel). KERNELS.md: every grid gives the same outputs.
std::vector<unsigned> AlignGrids(std::size_t numel) {
  std::vector<unsigned> grids = {static_cast<unsigned>(jitd::AlignBlockSizeGrid(static_cast<std::int64_t>(numel)))};
  for (unsigned g : {1u, 7u, 64u}) {
    if (std::find(grids.begin(), grids.end(), g) == grids.end()) grids.push_back(g);
  }
  return grids;
}

// The blocks each align_block_size case also runs at, at the rule's grid:
// 1024 and 512 threads, and the fewest that hold the experts (a power of two
// from 32). KERNELS.md: every block gives the same outputs.
std::vector<unsigned> AlignOtherBlocks(std::int32_t experts, std::size_t numel) {
  // The rule at no entries: the smallest power of two from 32 that holds them.
  const auto fewest = static_cast<unsigned>(jitd::AlignBlockSizeThreads(experts, 0));
  std::vector<unsigned> blocks;
  for (unsigned t : {1024u, 512u, fewest}) {
    if (t >= static_cast<unsigned>(experts) &&
        t != static_cast<unsigned>(jitd::AlignBlockSizeThreads(experts, static_cast<std::int64_t>(numel))) &&
        std::find(blocks.begin(), blocks.end(), t) == blocks.end()) {
      blocks.push_back(t);
    }
  }
  return blocks;
}

// align_block_size at every grid of AlignGrids (the rule's block), and at
// every block of AlignOtherBlocks (the rule's grid), against the reference.
void ExpectAlignmentAtEveryGrid(const Function& f, const std::vector<std::int32_t>& ids, std::int32_t experts,
                                std::int32_t block_size) {
  const reference::MoeAlignment want = reference::align_block_size(ids, experts, block_size);
  for (unsigned grid : AlignGrids(ids.size())) {
    SCOPED_TRACE(text::Cat("grid ", grid));
    absl::StatusOr<reference::MoeAlignment> got = RunAlignBlockSize(f, ids, experts, block_size, grid);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectSameAlignment(*got, want);
  }
  const auto grid = static_cast<unsigned>(jitd::AlignBlockSizeGrid(static_cast<std::int64_t>(ids.size())));
  for (unsigned threads : AlignOtherBlocks(experts, ids.size())) {
    SCOPED_TRACE(text::Cat("block ", threads));
    absl::StatusOr<reference::MoeAlignment> got = RunAlignBlockSize(f, ids, experts, block_size, grid, 0, threads);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectSameAlignment(*got, want);
  }
}

// align_block_size's output cut as KERNELS.md defines align_single_token's:
// topk * block_size entries of sorted_token_ids, topk of expert_ids.
reference::MoeAlignment CutForSingleToken(reference::MoeAlignment a, std::int32_t topk, std::int32_t block_size) {
  a.sorted_token_ids.resize(static_cast<std::size_t>(topk) * static_cast<std::size_t>(block_size));
  a.expert_ids.resize(static_cast<std::size_t>(topk));
  return a;
}

struct AlignCase {
  std::int32_t topk, block_size, tokens, experts;
};

std::vector<AlignCase> AlignBlockSizeCases() {
  std::vector<AlignCase> cases;
  for (std::int32_t topk : {1, 2, 8, 32}) {
    for (std::int32_t block : {16, 64, 128}) {
      for (std::int32_t tokens : {1, 7, 64, 513, 4096}) {
        for (std::int32_t experts : {8, 64, 256}) cases.push_back({topk, block, tokens, experts});
      }
    }
  }
  return cases;
}

std::string AlignCaseName(const ::testing::TestParamInfo<AlignCase>& info) {
  const AlignCase& c = info.param;
  return text::Cat("topk", c.topk, "_block", c.block_size, "_tokens", c.tokens, "_experts", c.experts);
}

using MoeAlignBlockSize = GpuParamTest<AlignCase>;

TEST_P(MoeAlignBlockSize, MatchesReferenceWithUnusedExperts) {
  const AlignCase c = GetParam();
  absl::StatusOr<Function> f = AlignBlockSize(session());
  ASSERT_TRUE(f.ok()) << f.status();
  Rng rng(CaseSeed({3, c.topk, c.block_size, c.tokens, c.experts}));
  const std::vector<std::int32_t> ids = MakeRouting(c.tokens, c.topk, c.experts, rng);
  ExpectAlignmentAtEveryGrid(*f, ids, c.experts, c.block_size);
}

INSTANTIATE_TEST_SUITE_P(Routing, MoeAlignBlockSize, ::testing::ValuesIn(AlignBlockSizeCases()), AlignCaseName);

using MoeAlignBlockSizeEdges = GpuTest;

TEST_F(MoeAlignBlockSizeEdges, SkipsIdsOutsideTheExpertRange) {
  absl::StatusOr<Function> f = AlignBlockSize(session());
  ASSERT_TRUE(f.ok()) << f.status();
  constexpr std::int32_t kExperts = 64;
  Rng rng(CaseSeed({4}));
  std::vector<std::int32_t> ids = MakeRouting(513, 8, kExperts, rng);
  const std::int32_t outside[] = {-1, kExperts, kExperts + 1, 1 << 30, INT32_MIN, -kExperts};
  for (std::size_t i = 0; i < ids.size(); i += 1 + rng.Below(20)) ids[i] = outside[rng.Below(std::size(outside))];
  ExpectAlignmentAtEveryGrid(*f, ids, kExperts, 16);
}

TEST_F(MoeAlignBlockSizeEdges, MostExpertsTheKernelAllows) {
  absl::StatusOr<Function> f = AlignBlockSize(session());
  ASSERT_TRUE(f.ok()) << f.status();
  constexpr std::int32_t kExperts = 1024;  // KERNELS.md: num_experts <= 1024
  Rng rng(CaseSeed({5}));
  const std::vector<std::int32_t> ids = MakeRouting(4096, 8, kExperts, rng);
  ExpectAlignmentAtEveryGrid(*f, ids, kExperts, 64);
}

// Block sizes that are not multiples of 4 and sorted_token_ids 0 to 3
// elements off 16-byte alignment, at grids of 1, 3 and 8. Up to 8 x 32
// entries per working warp every block of a grid runs the one-block path and
// writes its own share of the positions below the padded total: shares end
// inside an expert's range, in its padding or past the total (8 blocks at
// 1 token x top-8), and none may be written twice or skipped. Block 1 at 257
// tokens (2056 entries) gives a padded total of more than 1024 slots.
TEST_F(MoeAlignBlockSizeEdges, OddBlockSizesAndUnalignedOutputs) {
  absl::StatusOr<Function> f = AlignBlockSize(session());
  ASSERT_TRUE(f.ok()) << f.status();
  for (const std::int32_t block : {1, 3, 5, 16}) {
    for (const std::int32_t tokens : {1, 7, 257}) {
      for (const std::int32_t experts : {8, 256}) {
        Rng rng(CaseSeed({6, block, tokens, experts}));
        const std::vector<std::int32_t> ids = MakeRouting(tokens, 8, experts, rng);
        const reference::MoeAlignment want = reference::align_block_size(ids, experts, block);
        for (const std::size_t offset : {0u, 1u, 2u, 3u}) {
          for (const unsigned grid : {1u, 3u, 8u}) {
            SCOPED_TRACE(text::Cat("block ", block, ", ", tokens, " tokens, ", experts, " experts, grid ", grid,
                                   ", sorted_token_ids ", offset, " element(s) off 16-byte alignment"));
            absl::StatusOr<reference::MoeAlignment> got = RunAlignBlockSize(*f, ids, experts, block, grid, offset);
            ASSERT_TRUE(got.ok()) << got.status();
            ExpectSameAlignment(*got, want);
          }
        }
      }
    }
  }
}

struct SingleTokenCase {
  std::int32_t topk, block_size, experts;
};

std::vector<SingleTokenCase> SingleTokenCases() {
  std::vector<SingleTokenCase> cases;
  for (std::int32_t topk : {1, 2, 8, 32}) {
    for (std::int32_t block : {16, 64, 128}) {
      for (std::int32_t experts : {8, 64, 256}) {
        if (topk <= experts) cases.push_back({topk, block, experts});  // topk distinct ids
      }
    }
  }
  return cases;
}

std::string SingleTokenCaseName(const ::testing::TestParamInfo<SingleTokenCase>& info) {
  const SingleTokenCase& c = info.param;
  return text::Cat("topk", c.topk, "_block", c.block_size, "_experts", c.experts);
}

// One token's ids through align_single_token, and through align_block_size
// (GPU and reference) with numel = topk: KERNELS.md says the first is the
// second cut to topk * block_size and topk entries.
void CheckSingleToken(KernelSession& session, const std::vector<std::int32_t>& ids, std::int32_t experts,
                      std::int32_t block_size) {
  absl::StatusOr<Function> single = AlignSingleToken(session);
  ASSERT_TRUE(single.ok()) << single.status();
  absl::StatusOr<Function> full = AlignBlockSize(session);
  ASSERT_TRUE(full.ok()) << full.status();
  const auto topk = static_cast<std::int32_t>(ids.size());

  absl::StatusOr<reference::MoeAlignment> got = RunAlignSingleToken(*single, ids, block_size);
  ASSERT_TRUE(got.ok()) << got.status();
  absl::StatusOr<reference::MoeAlignment> gpu_full =
      RunAlignBlockSize(*full, ids, experts, block_size, static_cast<unsigned>(jitd::AlignBlockSizeGrid(topk)));
  ASSERT_TRUE(gpu_full.ok()) << gpu_full.status();
  const reference::MoeAlignment ref_full = reference::align_block_size(ids, experts, block_size);
  {
    SCOPED_TRACE("align_block_size on the GPU vs its reference");
    ExpectSameAlignment(*gpu_full, ref_full);
  }
  {
    SCOPED_TRACE("align_single_token vs its reference");
    ExpectSameAlignment(*got, reference::align_single_token(ids, block_size));
  }
  {
    SCOPED_TRACE("align_single_token vs align_block_size's GPU output, cut");
    ExpectSameAlignment(*got, CutForSingleToken(*gpu_full, topk, block_size));
  }
  {
    SCOPED_TRACE("align_single_token vs align_block_size's reference output, cut");
    ExpectSameAlignment(*got, CutForSingleToken(ref_full, topk, block_size));
  }
}

using MoeAlignSingleToken = GpuParamTest<SingleTokenCase>;

TEST_P(MoeAlignSingleToken, EqualsAlignBlockSizeCut) {
  const SingleTokenCase c = GetParam();
  Rng rng(CaseSeed({6, c.topk, c.block_size, c.experts}));
  // topk distinct ids, in random order, from a random subset of the experts
  // (a quarter of them unused, unless topk needs more).
  const std::int32_t subset_size = std::max(c.topk, c.experts - c.experts / 4);
  const std::vector<std::int32_t> subset = DistinctBelow(c.experts, subset_size, rng);
  std::vector<std::int32_t> ids;
  for (std::int32_t k : DistinctBelow(subset_size, c.topk, rng)) ids.push_back(subset[static_cast<std::size_t>(k)]);
  CheckSingleToken(session(), ids, c.experts, c.block_size);
}

INSTANTIATE_TEST_SUITE_P(Routing, MoeAlignSingleToken, ::testing::ValuesIn(SingleTokenCases()), SingleTokenCaseName);

using MoeAlignSingleTokenEdges = GpuTest;

TEST_F(MoeAlignSingleTokenEdges, SkipsNegativeIdsLikeAlignBlockSize) {
  CheckSingleToken(session(), {40, -1, 3, 17, -1, 2, 63, 9}, 64, 16);
}

// ---------------------------------------------------------------------------
// moe.topk_sum: bit-exact (fp32 sum in ascending j, rounded once).

struct TopkSumCase {
  Dt dtype;
  std::int64_t rows;
  std::int32_t topk;
  std::int64_t dim;
};

std::vector<TopkSumCase> TopkSumCases() {
  struct Shape {
    std::int64_t rows;
    std::int32_t topk;
    std::int64_t dim;
  };
  // Model widths (4096, 7168, 2048), every KERNELS.md topk, 1 to 4096 rows,
  // and rows that are no multiple of 8 (127, 9: the scalar path).
  const Shape shapes[] = {{1, 1, 4096},   {7, 2, 7168},   {64, 8, 4096}, {513, 8, 2048},
                          {64, 32, 1024}, {4096, 8, 256}, {5, 8, 127},   {3, 32, 9}};
  std::vector<TopkSumCase> cases;
  for (Dt dt : {Dt::kBf16, Dt::kFp16, Dt::kFp32}) {
    for (const Shape& s : shapes) cases.push_back({dt, s.rows, s.topk, s.dim});
  }
  return cases;
}

std::string TopkSumCaseName(const ::testing::TestParamInfo<TopkSumCase>& info) {
  const TopkSumCase& c = info.param;
  return text::Cat(DtName(c.dtype), "_rows", c.rows, "_topk", c.topk, "_dim", c.dim);
}

template <typename T>
void CheckTopkSum(KernelSession& session, const TopkSumCase& c) {
  absl::StatusOr<Function> f = TopkSum<T>(session);
  ASSERT_TRUE(f.ok()) << f.status();
  Rng rng(CaseSeed({7, kDtId<T>, c.rows, c.topk, c.dim}));
  const std::vector<T> in = RandomArray<T>(static_cast<std::size_t>(c.rows * c.topk * c.dim), rng);
  const std::vector<T> want = reference::topk_sum<T>(in, c.rows, c.topk, c.dim);
  for (std::size_t offset : kOffsets) {
    SCOPED_TRACE(text::Cat("arrays ", offset, " element(s) off 16-byte alignment"));
    absl::StatusOr<std::vector<T>> got = [&]() -> absl::StatusOr<std::vector<T>> {
      GPU_ASSIGN(auto din, DeviceArray<T>::Upload(in, offset));
      GPU_ASSIGN(auto out, DeviceArray<T>::Output(want.size(), offset));
      GPU_TRY(LaunchTopkSum(*f, ElementwiseLaunch(c.rows * c.dim), out.ptr(), din.ptr(), c.rows, c.topk, c.dim));
      return out.Read();
    }();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(SameBits(*got, want));
  }
}

using MoeTopkSum = GpuParamTest<TopkSumCase>;

TEST_P(MoeTopkSum, BitExactWithReference) {
  const TopkSumCase c = GetParam();
  if (c.dtype == Dt::kBf16) CheckTopkSum<Bf16>(session(), c);
  if (c.dtype == Dt::kFp16) CheckTopkSum<Fp16>(session(), c);
  if (c.dtype == Dt::kFp32) CheckTopkSum<float>(session(), c);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MoeTopkSum, ::testing::ValuesIn(TopkSumCases()), TopkSumCaseName);

// ---------------------------------------------------------------------------
// activation.silu_and_mul: within 1 ulp of T everywhere, bit-exact on at
// least 99.9% of the elements.

constexpr std::uint64_t kSiluMaxUlps = 1;
constexpr double kSiluMinExact = 0.999;

struct SiluCase {
  Dt dtype;
  std::int64_t rows, dim;
};

std::vector<SiluCase> SiluCases() {
  // MLP widths (11008, 14336, 4096, 1408), 1 to 4096 rows, and an odd width
  // (127: the scalar path).
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{1, 11008},  {7, 14336},  {64, 4096},
                                                          {513, 1408}, {4096, 256}, {9, 127}};
  std::vector<SiluCase> cases;
  for (Dt dt : {Dt::kBf16, Dt::kFp16, Dt::kFp32}) {
    for (auto [rows, dim] : shapes) cases.push_back({dt, rows, dim});
  }
  return cases;
}

std::string SiluCaseName(const ::testing::TestParamInfo<SiluCase>& info) {
  return text::Cat(DtName(info.param.dtype), "_rows", info.param.rows, "_dim", info.param.dim);
}

template <typename T>
void CheckSiluAndMul(KernelSession& session, const std::vector<T>& in, std::int64_t rows, std::int64_t dim) {
  absl::StatusOr<Function> f = SiluAndMul<T>(session);
  ASSERT_TRUE(f.ok()) << f.status();
  const std::vector<T> want = reference::silu_and_mul<T>(in, rows, dim);
  for (std::size_t offset : kOffsets) {
    SCOPED_TRACE(text::Cat("arrays ", offset, " element(s) off 16-byte alignment"));
    absl::StatusOr<std::vector<T>> got = [&]() -> absl::StatusOr<std::vector<T>> {
      GPU_ASSIGN(auto din, DeviceArray<T>::Upload(in, offset));
      GPU_ASSIGN(auto out, DeviceArray<T>::Output(want.size(), offset));
      GPU_TRY(LaunchSiluAndMul(*f, ElementwiseLaunch(rows * dim), out.ptr(), din.ptr(), rows, dim));
      return out.Read();
    }();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(WithinUlps(*got, want, kSiluMaxUlps, kSiluMinExact));
  }
}

using ActivationSiluAndMul = GpuParamTest<SiluCase>;

TEST_P(ActivationSiluAndMul, WithinOneUlpAndMostlyExact) {
  const SiluCase c = GetParam();
  Rng rng(CaseSeed({8, static_cast<std::int64_t>(c.dtype), c.rows, c.dim}));
  const auto n = static_cast<std::size_t>(2 * c.rows * c.dim);
  // a from 2^-8 to 2^5 in magnitude: silu's curved part, its tails, and
  // where exp(-a) is tiny; special values mixed in.
  const ValueMix mix{.min_exp = -8, .max_exp = 5};
  if (c.dtype == Dt::kBf16) CheckSiluAndMul<Bf16>(session(), RandomArray<Bf16>(n, rng, mix), c.rows, c.dim);
  if (c.dtype == Dt::kFp16) CheckSiluAndMul<Fp16>(session(), RandomArray<Fp16>(n, rng, mix), c.rows, c.dim);
  if (c.dtype == Dt::kFp32) CheckSiluAndMul<float>(session(), RandomArray<float>(n, rng, mix), c.rows, c.dim);
}

INSTANTIATE_TEST_SUITE_P(Shapes, ActivationSiluAndMul, ::testing::ValuesIn(SiluCases()), SiluCaseName);

// Every finite 16-bit value as `a`: row 0 with b = 1 (the output is then
// R(silu(a)) itself), row 1 with random b.
template <typename T>
std::vector<T> EveryFiniteInput() {
  constexpr std::int64_t kDim = 1 << 16;
  const std::uint16_t exponent_mask = std::is_same_v<T, Bf16> ? 0x7f80 : 0x7c00;
  Rng rng(CaseSeed({9, kDtId<T>}));
  const std::vector<T> random_b = RandomArray<T>(kDim, rng);
  std::vector<T> in(4 * kDim);
  for (std::int64_t row = 0; row < 2; ++row) {
    for (std::int64_t i = 0; i < kDim; ++i) {
      auto bits = static_cast<std::uint16_t>(i);
      if ((bits & exponent_mask) == exponent_mask) bits = 0;  // inf and NaN: not inputs
      in[static_cast<std::size_t>(row * 2 * kDim + i)] = T{bits};
      in[static_cast<std::size_t>(row * 2 * kDim + kDim + i)] =
          row == 0 ? reference::round_to<T>(1.0f) : random_b[static_cast<std::size_t>(i)];
    }
  }
  return in;
}

using ActivationSiluAndMulEveryInput = GpuTest;

TEST_F(ActivationSiluAndMulEveryInput, Bf16) { CheckSiluAndMul<Bf16>(session(), EveryFiniteInput<Bf16>(), 2, 1 << 16); }

TEST_F(ActivationSiluAndMulEveryInput, Fp16) { CheckSiluAndMul<Fp16>(session(), EveryFiniteInput<Fp16>(), 2, 1 << 16); }

// ---------------------------------------------------------------------------
// norm.rmsnorm: within 2 ulp (bf16, fp16) or 16 ulp (fp32) of the fp64
// reference, for every block size the manifest offers.

template <typename T>
constexpr double kRmsNormMaxUlps = std::is_same_v<T, float> ? 16.0 : 2.0;

struct RmsNormCase {
  Dt dtype;
  int threads;
  std::int64_t rows, dim;
  float eps;
};

std::vector<RmsNormCase> RmsNormCases() {
  struct Shape {
    std::int64_t rows, dim;
    float eps;
  };
  // Model widths up to 8192, 1 to 513 rows, an odd width (127: the scalar
  // path), and a zero row (see CheckRmsNorm).
  const Shape shapes[] = {{1, 4096, 1e-6f},  {7, 3072, 1e-5f},  {64, 5120, 1e-6f},
                          {513, 127, 1e-6f}, {33, 8192, 1e-6f}, {300, 2048, 1e-6f}};
  std::vector<RmsNormCase> cases;
  for (Dt dt : {Dt::kBf16, Dt::kFp16, Dt::kFp32}) {
    for (int threads : {128, 256, 512, 1024}) {
      for (const Shape& s : shapes) cases.push_back({dt, threads, s.rows, s.dim, s.eps});
    }
  }
  return cases;
}

std::string RmsNormCaseName(const ::testing::TestParamInfo<RmsNormCase>& info) {
  const RmsNormCase& c = info.param;
  return text::Cat(DtName(c.dtype), "_threads", c.threads, "_rows", c.rows, "_dim", c.dim);
}

template <typename T>
void CheckRmsNorm(KernelSession& session, const RmsNormCase& c) {
  absl::StatusOr<Function> f = RmsNorm<T>(session, c.threads);
  ASSERT_TRUE(f.ok()) << f.status();
  Rng rng(CaseSeed({10, kDtId<T>, c.threads, c.rows, c.dim}));
  // |x| from 1/8 to 16 with zeros and subnormals mixed in (no large values:
  // their squares overflow the fp32 sum, which KERNELS.md does not ask about).
  std::vector<T> x =
      RandomArray<T>(static_cast<std::size_t>(c.rows * c.dim), rng, {.min_exp = -3, .max_exp = 3, .special_every = 0});
  const std::vector<T> special = SpecialValues<T>();
  for (std::size_t i = 0; i < x.size(); i += 1 + rng.Below(97)) {
    const T s = special[rng.Below(6)];  // ±0 and the first subnormals: the list's first entries
    x[i] = s;
  }
  if (c.rows > 2) {  // an all-zero row: 0 * rsqrt(eps) = 0
    for (std::int64_t d = 0; d < c.dim; ++d) x[static_cast<std::size_t>(c.dim + d)] = T{};
  }
  const std::vector<T> weight =
      RandomArray<T>(static_cast<std::size_t>(c.dim), rng, {.min_exp = -1, .max_exp = 1, .special_every = 0});
  const std::vector<double> want = reference::rmsnorm<T>(x, weight, c.rows, c.dim, c.eps);
  struct Run {
    std::size_t offset;
    unsigned grid;
  };
  // One block per row; fewer blocks than rows (the grid-stride loop); and
  // misaligned arrays (the scalar path).
  const Run runs[] = {{0, static_cast<unsigned>(std::min<std::int64_t>(c.rows, 65535))}, {0, 7}, {1, 132}};
  for (const Run& run : runs) {
    SCOPED_TRACE(text::Cat("grid ", run.grid, ", arrays ", run.offset, " element(s) off 16-byte alignment"));
    absl::StatusOr<std::vector<T>> got = [&]() -> absl::StatusOr<std::vector<T>> {
      GPU_ASSIGN(auto dx, DeviceArray<T>::Upload(x, run.offset));
      GPU_ASSIGN(auto dw, DeviceArray<T>::Upload(weight, run.offset));
      GPU_ASSIGN(auto out, DeviceArray<T>::Output(x.size(), run.offset));
      GPU_TRY(LaunchRmsNorm(*f, run.grid, c.threads, out.ptr(), dx.ptr(), dw.ptr(), c.rows, c.dim, c.eps));
      return out.Read();
    }();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(WithinUlpsOf(*got, want, kRmsNormMaxUlps<T>));
  }
}

using NormRmsNorm = GpuParamTest<RmsNormCase>;

TEST_P(NormRmsNorm, WithinUlpsOfFp64Reference) {
  const RmsNormCase c = GetParam();
  if (c.dtype == Dt::kBf16) CheckRmsNorm<Bf16>(session(), c);
  if (c.dtype == Dt::kFp16) CheckRmsNorm<Fp16>(session(), c);
  if (c.dtype == Dt::kFp32) CheckRmsNorm<float>(session(), c);
}

INSTANTIATE_TEST_SUITE_P(Shapes, NormRmsNorm, ::testing::ValuesIn(RmsNormCases()), RmsNormCaseName);

}  // namespace
}  // namespace jitd::gpu
