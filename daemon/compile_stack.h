// The compile half of jitd, shared by `jitd serve`, `jitd lint` and
// `jitd warm`: the toolchain, the kernels (resolver) and the worker pool.
//
// Workers are this same binary in a hidden mode (`jitd worker --fd N
// --pch-dir DIR`), started with posix_spawn: gRPC threads and fork() do not
// mix, and a separate executable could drift from the daemon's NVRTC.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "manifest.h"
#include "namespace_guard.h"
#include "worker_pool.h"

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
  std::unique_ptr<ScratchDir> scratch;
  std::unique_ptr<compiler::WorkerPool> pool;  // declared last: stopped first
};

// Reads the kernels directory (into an immutable snapshot under
// `snapshot_root` when given) and builds a resolver with `default_arch`.
absl::StatusOr<std::shared_ptr<const manifest::Resolver>> LoadKernels(const std::filesystem::path& kernels_dir,
                                                                      const std::filesystem::path& snapshot_root,
                                                                      const manifest::Toolchain& toolchain,
                                                                      const std::string& default_arch);

// A kernels directory loaded for serving, and what the namespace guard's
// source check found in it (empty when clean). The caller decides whether
// findings stop it: the daemon refuses to start on them, and a reload
// keeps the kernels it serves.
struct CheckedKernels {
  std::shared_ptr<const manifest::Resolver> resolver;
  std::vector<guard::Finding> findings;
};

// LoadKernels, then guard::CheckSources over the tree it read (the same
// bytes the keys and compiles use, not a second read of the directory).
absl::StatusOr<CheckedKernels> LoadCheckedKernels(const std::filesystem::path& kernels_dir,
                                                  const std::filesystem::path& snapshot_root,
                                                  const manifest::Toolchain& toolchain,
                                                  const std::string& default_arch);

// The file in a cache directory that remembers the toolkit headers'
// fingerprint (cache::MemoizedTreeFingerprint).
inline constexpr char kToolkitFingerprintMemo[] = "toolkit-fingerprint";

// Detects the toolchain once per process. Without a memo the header
// fingerprint reads the toolkit's ~30 MB of headers (~70 ms warm, seconds
// from a cold disk); with `cache_dir`, it is remembered in
// cache_dir/toolkit-fingerprint and a later start with the same toolkit only
// stats the headers. Only the first call's `cache_dir` counts.
absl::StatusOr<manifest::Toolchain> DetectToolchain(const std::filesystem::path& cache_dir = {});

// Starts `workers` compile workers of this binary; beyond `max_queue`
// waiting jobs, Compile answers RESOURCE_EXHAUSTED (0 = the pool's default).
absl::StatusOr<CompileStack> StartCompileStack(std::shared_ptr<const manifest::Resolver> resolver, size_t workers,
                                               size_t max_queue = 0);

}  // namespace jitd::daemon
