// The compile half of jitd, shared by `jitd serve`, `jitd lint` and
// `jitd warm`: the toolchain, the kernels (resolver) and the worker pool.
//
// Workers are this same binary in a hidden mode (`jitd worker --fd N
// --pch-dir DIR`), started with posix_spawn: gRPC threads and fork() do not
// mix, and a separate executable could drift from the daemon's NVRTC.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/worker_pool.h"
#include "config/command_line.h"
#include "guard/namespace_guard.h"
#include "manifest/manifest.h"

namespace jitd::daemon {

// The argv[1] that selects worker mode; not listed in --help.
inline constexpr std::string_view kWorkerCommand = "worker";

// This executable's worker command line ({"/path/to/jitd", "worker"}).
std::vector<std::string> SelfWorkerArgv();

// A private, empty directory for the pool's precompiled headers
// ($TMPDIR/jitd-<purpose>-<pid>-XXXXXX), removed with everything in it when
// the object goes away; those of processes that died without removing
// theirs are removed when the next one is created.
class ScratchDir {
 public:
  static absl::StatusOr<std::unique_ptr<ScratchDir>> Create(std::string_view purpose);
  ~ScratchDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  explicit ScratchDir(std::filesystem::path p) : path_(std::move(p)) {}
  std::filesystem::path path_;
};

struct CompileStack {
  std::shared_ptr<const manifest::Resolver> resolver;
  // The toolkit the pool checks every job against (may be null).
  std::shared_ptr<compiler::ToolkitWatch> toolkit;
  std::unique_ptr<ScratchDir> scratch;
  std::unique_ptr<compiler::WorkerPool> pool;  // declared last: stopped first
};

// Reads one kernel tree into memory and builds a resolver with
// `default_arch`, the tree served as `name` ("" = unnamed: bare kernel
// names) and locked by `lock` (empty = not locked; the lock must name the
// same tree). Compiles never read the directory again.
absl::StatusOr<std::shared_ptr<const manifest::Resolver>> LoadKernels(const std::filesystem::path& kernels_dir,
                                                                      const std::string& name,
                                                                      const std::filesystem::path& lock,
                                                                      const manifest::Toolchain& toolchain,
                                                                      const std::string& default_arch);

// The directory under a cache directory where jitd before hermetic compiles
// kept copies of the kernels tree; nothing reads it any more.
inline constexpr char kOldKernelSnapshots[] = "kernel-trees";

// Removes cache_dir/kernel-trees/ (old kernels snapshots, and .tmp-* left
// by failed writes) so that an upgraded cache keeps no copy anybody could
// mistake for the sources. Logs what it removed; a failure is logged, not
// returned (nothing depends on it).
void SweepOldKernelSnapshots(const std::filesystem::path& cache_dir);

// Watches the toolkit headers in `cuda_include` and the NVRTC libraries.
// Without a memo the first fingerprint reads ~30 MB of headers and ~110 MB
// of libraries; with `cache_dir`, both are remembered there
// (compiler::kToolkitHeadersMemo, kNvrtcLibrariesMemo) and a later start
// with the same toolkit only stats the files.
absl::StatusOr<std::shared_ptr<compiler::ToolkitWatch>> WatchToolkit(const std::filesystem::path& cuda_include,
                                                                     const std::filesystem::path& cache_dir = {});

// The toolchain once, for one-shot tools (lint, warm): WatchToolkit's
// identity plus what the linked NVRTC says.
absl::StatusOr<manifest::Toolchain> DetectToolchain(
    const std::filesystem::path& cuda_include = compiler::kDefaultCudaInclude,
    const std::filesystem::path& cache_dir = {});

// The module toolchain (kind = "module" kernels) the daemon's --nvcc,
// --host-cxx and --tvm-ffi-root name, detected on first use, fingerprints
// memoized in `memo_dir`.
// `bundled_builders`: what built the modules of the mounted bundles
// (cache::Bundle::module_builders), served without nvcc when it is absent.
std::shared_ptr<const manifest::ModuleToolchainSource> ModuleToolchainOf(
    const DaemonConfig& config, const std::filesystem::path& memo_dir, std::vector<std::string> bundled_builders = {});
std::shared_ptr<const manifest::ModuleToolchainSource> ModuleToolchainOf(const OfflineOptions& o,
                                                                         const std::filesystem::path& memo_dir);

// Starts `workers` compile workers of this binary; beyond `max_queue`
// waiting jobs, Compile answers RESOURCE_EXHAUSTED (0 = the pool's default).
// With `toolkit`, the pool checks every job's toolkit against it
// (WorkerPool::Options::toolkit); with `module_check`, every module build
// is checked by it before it is answered (Options::check_module_build).
absl::StatusOr<CompileStack> StartCompileStack(
    std::shared_ptr<const manifest::Resolver> resolver, size_t workers, size_t max_queue = 0,
    std::shared_ptr<compiler::ToolkitWatch> toolkit = nullptr,
    std::function<absl::Status(const compiler::CompileJob&)> module_check = nullptr);

}  // namespace jitd::daemon
