// Small real NVRTC programs shared by the compiler tests and bench_compile.
#pragma once

#include <string>
#include <vector>

#include "compiler/compile_job.h"

#ifndef JITD_CUDA_INCLUDE_DIR
#error "JITD_CUDA_INCLUDE_DIR must name the CUDA toolkit's include directory"
#endif
#ifndef JITD_COMPILE_WORKER_EXE
#error "JITD_COMPILE_WORKER_EXE must name the jitd-compile-worker executable"
#endif

namespace jitd::compiler::testing {

inline const std::string kCudaInclude = JITD_CUDA_INCLUDE_DIR;
inline const std::string kWorkerExe = JITD_COMPILE_WORKER_EXE;

// A trivial kernel: ~25 ms in NVRTC.
inline constexpr char kTrivialSource[] = R"(
namespace sglang {
template <typename T>
__global__ void scale(T* x, T a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
}  // namespace sglang
)";

// A header-heavy kernel: ~1 s in NVRTC, nearly all of it the front end
// parsing CUB. Two instantiations differ only in their name expression.
inline constexpr char kCubSource[] = R"(
#include <cub/block/block_reduce.cuh>

namespace sglang {
template <int kBlock>
__global__ void block_sum(const float* in, float* out) {
  using Reduce = cub::BlockReduce<float, kBlock>;
  __shared__ typename Reduce::TempStorage storage;
  const float sum = Reduce(storage).Sum(in[blockIdx.x * kBlock + threadIdx.x]);
  if (threadIdx.x == 0) out[blockIdx.x] = sum;
}
}  // namespace sglang
)";

// -frandom-seed makes the cubin deterministic (NVRTC otherwise names
// internal-linkage symbols with a fresh random number per compile).
inline std::vector<std::string> BaseOptions() {
  return {"-arch=sm_90", "-std=c++17", "-frandom-seed=jitd", "-I" + kCudaInclude + "/cccl", "-I" + kCudaInclude};
}

inline CompileJob TrivialJob() {
  CompileJob job;
  job.program_name = "tests/trivial_scale.cu";
  job.source = kTrivialSource;
  job.options = BaseOptions();
  job.name_expressions = {"sglang::scale<float>", "sglang::scale<int>"};
  return job;
}

inline CompileJob CubJob(int block_size, bool use_pch = false) {
  CompileJob job;
  job.program_name = "tests/cub_block_sum.cu";
  job.source = kCubSource;
  job.options = BaseOptions();
  job.name_expressions = {"sglang::block_sum<" + std::to_string(block_size) + ">"};
  job.use_pch = use_pch;
  return job;
}

// `job` with its digest, as the resolver (or WorkerPool) sends it: a worker
// refuses a job without a matching one.
inline CompileJob Sealed(CompileJob job) {
  job.digest = JobDigest(job);
  return job;
}

// A program whose headers come from memory: "common/value.cuh" included by
// its root-relative name, and "twice.cuh" beside it, spelled short.
inline CompileJob HeaderJob() {
  CompileJob job;
  job.program_name = "tests/with_headers.cu";
  job.source = R"(#include "common/value.cuh"
namespace sglang {
__global__ void put(int* x) { *x = twice(kValue); }
}  // namespace sglang
)";
  job.headers = {{"common/value.cuh", "common/value.cuh",
                  "#pragma once\n#include \"twice.cuh\"\nnamespace sglang { constexpr int kValue = 21; }\n"},
                 {"twice.cuh", "common/twice.cuh",
                  "#pragma once\nnamespace sglang { __device__ inline int twice(int v) { return 2 * v; } }\n"}};
  job.options = BaseOptions();
  job.name_expressions = {"sglang::put"};
  return job;
}

inline bool HasElfMagic(const std::string& cubin) {
  return cubin.size() >= 4 && cubin.compare(0, 4,
                                            "\x7f"
                                            "ELF") == 0;
}

}  // namespace jitd::compiler::testing
