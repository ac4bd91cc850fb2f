// bench_compile: what the compile worker pool costs and what it buys, for a
// header-heavy (CUB) and a trivial test kernel, then for every shipped kernel
// through the production resolver.
//
//   build-dir/tests/compiler/bench_compile [runs]     (default 3 runs)
//
// Prints medians of `runs` runs (5x as many for the trivial kernel) of:
//   - a cold compile in this process (NVRTC direct) vs the same job through a
//     1-worker pool: the pool's overhead (frames over a socketpair, a copy of
//     the cubin);
//   - two compiles (two instantiations) in parallel on a 2-worker pool vs
//     sequentially in one process (NVRTC serialises compiles per process);
//   - the PCH speedup in a warm worker: the first instantiation (which
//     creates the PCH) vs the second (which reuses it), and the second vs a
//     cold compile without PCH (the shipped rmsnorm's project headers come
//     from memory, as every daemon compile's do);
//   - what the toolkit check costs that a watched pool runs once per
//     compile, after it (ToolkitWatch::Check: a stat of every toolkit header
//     and of the NVRTC libraries).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "compiler/nvrtc_program.h"
#include "compiler/toolkit_watch.h"
#include "compiler/worker_pool.h"
#include "manifest/manifest.h"
#include "test_programs.h"

namespace {

using jitd::compiler::CompileInProcess;
using jitd::compiler::CompileJob;
using jitd::compiler::CompileResult;
using jitd::compiler::Priority;
using jitd::compiler::WorkerPool;
using Clock = std::chrono::steady_clock;

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// Milliseconds `body` took; exits the program if it fails.
double TimeMs(const std::function<absl::StatusOr<CompileResult>()>& body) {
  const auto start = Clock::now();
  absl::StatusOr<CompileResult> result = body();
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (!result.ok()) {
    std::fprintf(stderr, "compile failed: %s\n", std::string(result.status().message()).c_str());
    std::exit(1);
  }
  return ms;
}

struct Kernel {
  const char* name;
  // Runs per measurement, as a multiple of the command line's count (cheap
  // kernels get more, to steady their medians).
  int runs_factor;
  // Instantiation 0 or 1 of the kernel (they differ only in the name expression).
  std::function<CompileJob(int instance, bool use_pch)> job;
};

class Bench {
 public:
  explicit Bench(int runs) : runs_(runs) {
    char scratch_template[] = "/tmp/jitd-bench-compile-XXXXXX";
    if (mkdtemp(scratch_template) == nullptr) std::exit(1);
    scratch_ = scratch_template;
  }
  ~Bench() { std::filesystem::remove_all(scratch_); }

  std::unique_ptr<WorkerPool> StartPool(size_t workers) {
    WorkerPool::Options options;
    options.worker_argv = {jitd::compiler::testing::kWorkerExe};
    options.workers = workers;
    options.scratch_dir = scratch_ / ("pool-" + std::to_string(pools_++));
    absl::StatusOr<std::unique_ptr<WorkerPool>> pool = WorkerPool::Start(options);
    if (!pool.ok()) {
      std::fprintf(stderr, "cannot start the pool: %s\n", std::string(pool.status().message()).c_str());
      std::exit(1);
    }
    // Load NVRTC in every worker so that no measurement pays for it.
    std::vector<std::future<absl::StatusOr<CompileResult>>> warmups;
    for (size_t i = 0; i < workers; ++i) {
      warmups.push_back(std::async(std::launch::async, [&pool] {
        return (*pool)->Compile(jitd::compiler::testing::TrivialJob(), Priority::kLive);
      }));
    }
    for (auto& warmup : warmups) {
      if (!warmup.get().ok()) std::exit(1);
    }
    return *std::move(pool);
  }

  void Run(const Kernel& kernel) {
    const CompileJob cold = kernel.job(0, false);
    std::vector<double> in_process;
    std::vector<double> pooled;
    std::vector<double> round_trip;  // pooled wall time beyond the worker's own NVRTC time
    std::vector<double> sequential;
    std::vector<double> parallel;
    std::vector<double> pch_first;
    std::vector<double> pch_second;
    {
      std::unique_ptr<WorkerPool> one = StartPool(1);
      std::unique_ptr<WorkerPool> two = StartPool(2);
      for (int run = 0; run < runs_ * kernel.runs_factor; ++run) {
        in_process.push_back(TimeMs([&] { return CompileInProcess(cold, nullptr, nullptr); }));
        absl::StatusOr<CompileResult> through_pool;
        pooled.push_back(TimeMs([&] {
          through_pool = one->Compile(cold, Priority::kLive);
          return through_pool;
        }));
        round_trip.push_back(pooled.back() - through_pool->compile_ms);
        const CompileJob a = kernel.job(0, false);
        const CompileJob b = kernel.job(1, false);
        sequential.push_back(TimeMs([&] {
          absl::StatusOr<CompileResult> first = CompileInProcess(a, nullptr, nullptr);
          return first.ok() ? CompileInProcess(b, nullptr, nullptr) : first;
        }));
        parallel.push_back(TimeMs([&] {
          auto first = std::async(std::launch::async, [&] { return two->Compile(a, Priority::kLive); });
          absl::StatusOr<CompileResult> second = two->Compile(b, Priority::kLive);
          absl::StatusOr<CompileResult> first_result = first.get();
          return first_result.ok() ? second : first_result;
        }));
      }
    }
    for (int run = 0; run < runs_ * kernel.runs_factor; ++run) {
      std::unique_ptr<WorkerPool> fresh = StartPool(1);  // a worker without a PCH yet
      const CompileJob first = kernel.job(0, true);
      const CompileJob second = kernel.job(1, true);
      pch_first.push_back(TimeMs([&] { return fresh->Compile(first, Priority::kLive); }));
      absl::StatusOr<CompileResult> reused;
      pch_second.push_back(TimeMs([&] {
        reused = fresh->Compile(second, Priority::kLive);
        return reused;
      }));
      if (!reused->used_pch)
        std::fprintf(stderr, "warning: %s: the second instantiation did not use the PCH\n", kernel.name);
    }

    const double cold_ms = Median(in_process);
    const double pooled_ms = Median(pooled);
    const double sequential_ms = Median(sequential);
    const double parallel_ms = Median(parallel);
    const double first_ms = Median(pch_first);
    const double second_ms = Median(pch_second);
    Row(kernel.name, "cold, in-process (NVRTC direct)", cold_ms, "");
    Row(kernel.name, "cold, through a 1-worker pool", pooled_ms,
        Fixed(pooled_ms / cold_ms, 2) + "x in-process (" + (pooled_ms >= cold_ms ? "+" : "") +
            Fixed(pooled_ms - cold_ms, 1) + " ms)");
    Row(kernel.name, "  of which pool round trip (wall - NVRTC)", Median(round_trip),
        "frames, copies and thread wake-ups, per compile");
    Row(kernel.name, "2 instantiations, sequential in-process", sequential_ms, "");
    Row(kernel.name, "2 instantiations, parallel on 2 workers", parallel_ms,
        Fixed(parallel_ms / sequential_ms, 2) + "x sequential");
    Row(kernel.name, "PCH: 1st instantiation (creates the PCH)", first_ms,
        Fixed(first_ms / cold_ms, 2) + "x cold in-process");
    Row(kernel.name, "PCH: 2nd instantiation (reuses it)", second_ms,
        Fixed(first_ms / second_ms, 1) + "x faster than the 1st, " + Fixed(cold_ms / second_ms, 1) +
            "x faster than cold");
  }

 private:
  // `value` with `digits` decimals.
  static std::string Fixed(double value, int digits) {
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), "%.*f", digits, value);
    return buffer;
  }
  static void Row(const char* kernel, const char* what, double ms, const std::string& comparison) {
    std::printf("%-8s %-42s %9.1f ms   %s\n", kernel, what, ms, comparison.c_str());
    std::fflush(stdout);
  }

  int runs_;
  int pools_ = 0;
  std::filesystem::path scratch_;
};

// The shipped kernels, resolved by the production resolver: each kernel's
// first instantiation cold, in this process and through a 1-worker pool;
// then the full set of measurements for rmsnorm (the CUB kernel).
void RunShippedKernels(Bench& bench, int runs) {
  using namespace jitd::manifest;
  auto toolchain = Toolchain::Detect();
  auto tree = KernelTree::Load(JITD_KERNELS_DIR);
  if (!toolchain.ok() || !tree.ok()) std::exit(1);
  auto resolver = Resolver::Create(*tree, *toolchain, "sm_90");
  if (!resolver.ok()) std::exit(1);
  auto job_for = [&](const std::string& kernel, size_t instance) {
    const KernelDef* def = (*tree)->manifest().Find(kernel);
    auto all = Manifest::Instantiations(*def);
    auto resolved = (*resolver)->Resolve({kernel, all[std::min(instance, all.size() - 1)], "sm_90", {}});
    if (!resolved.ok()) std::exit(1);
    return resolved->job;
  };
  std::printf("\nshipped kernels, first instantiation, sm_90: cold compile in-process vs through a 1-worker pool\n");
  std::unique_ptr<WorkerPool> pool = bench.StartPool(1);
  for (const auto& kernel : (*tree)->manifest().kernels) {
    CompileJob job = job_for(kernel.name, 0);
    job.use_pch = false;
    std::vector<double> direct, pooled;
    for (int run = 0; run < runs; ++run) {
      direct.push_back(TimeMs([&] { return CompileInProcess(job, nullptr, nullptr); }));
      pooled.push_back(TimeMs([&] { return pool->Compile(job, Priority::kLive); }));
    }
    std::printf("%-32s %9.1f ms in-process %9.1f ms pool   %.2fx\n", kernel.name.c_str(), Median(direct),
                Median(pooled), Median(pooled) / Median(direct));
    std::fflush(stdout);
  }
  std::printf("\n");
  bench.Run(Kernel{"rmsnorm", 1, [&](int instance, bool use_pch) {
                     CompileJob job = job_for("norm.rmsnorm", instance == 0 ? 0 : 1);
                     job.use_pch = use_pch;
                     return job;
                   }});
}

void RunToolkitCheck(int runs) {
  auto watch = jitd::compiler::ToolkitWatch::Start({});
  if (!watch.ok()) std::exit(1);
  size_t files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(jitd::compiler::kDefaultCudaInclude)) {
    files += entry.is_regular_file() ? 1 : 0;
  }
  std::vector<double> checks;
  for (int run = 0; run < runs * 10; ++run) {
    const auto start = Clock::now();
    if (!(*watch)->Check().ok()) std::exit(1);
    checks.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::printf(
      "\ntoolkit check (ToolkitWatch::Check, %zu headers + 2 NVRTC libraries): %.2f ms median of %d, "
      "once per compile (after it)\n",
      files, Median(checks), runs * 10);
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  const jitd::compiler::NvrtcVersionNumber nvrtc = jitd::compiler::NvrtcVersion();
  std::printf("bench_compile: medians of %d runs (trivial: %d); nproc %u; NVRTC %d.%d; -arch=sm_90\n", runs, runs * 5,
              std::thread::hardware_concurrency(), nvrtc.major, nvrtc.minor);
  std::printf("%-8s %-42s %12s   %s\n", "kernel", "measurement", "time", "comparison");

  const Kernel cub{"cub", 1, [](int instance, bool use_pch) {
                     return jitd::compiler::testing::CubJob(instance == 0 ? 128 : 256, use_pch);
                   }};
  const Kernel trivial{"trivial", 5, [](int instance, bool use_pch) {
                         CompileJob job = jitd::compiler::testing::TrivialJob();
                         job.name_expressions = {instance == 0 ? "sglang::scale<float>" : "sglang::scale<int>"};
                         job.use_pch = use_pch;
                         return job;
                       }};
  Bench bench(runs);
  bench.Run(cub);
  bench.Run(trivial);
  RunShippedKernels(bench, runs);
  RunToolkitCheck(runs);
  return 0;
}
