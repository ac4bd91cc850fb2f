#include "app/compile_stack.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "manifest/lock.h"
#include "spdlog/spdlog.h"

namespace jitd::daemon {

namespace fs = std::filesystem;
using text::Cat;

std::vector<std::string> SelfWorkerArgv() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return {ec ? std::string("/proc/self/exe") : self.string(), std::string(kWorkerCommand)};
}

namespace {

// Removes this user's scratch directories of `purpose` whose process is
// gone: a process killed with SIGKILL (or crashed) never ran ~ScratchDir,
// and precompiled headers left behind take tens of MB each.
void RemoveOrphanScratchDirs(const fs::path& parent, std::string_view purpose) {
  const std::string prefix = Cat("jitd-", purpose, "-");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const std::string_view rest = std::string_view(name).substr(prefix.size());
    pid_t pid = 0;
    const auto [end, parse_error] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
    if (parse_error != std::errc() || pid <= 0 || end == rest.data() + rest.size() || *end != '-') continue;
    struct stat info {};
    if (::lstat(entry.path().c_str(), &info) != 0 || !S_ISDIR(info.st_mode) || info.st_uid != ::geteuid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    fs::remove_all(entry.path(), ec);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<ScratchDir>> ScratchDir::Create(std::string_view purpose) {
  RemoveOrphanScratchDirs(fs::temp_directory_path(), purpose);
  // The pid in the name lets a later process tell an orphan from a live one.
  std::string tmpl = (fs::temp_directory_path() / Cat("jitd-", purpose, "-", ::getpid(), "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return absl::FailedPreconditionError(
        Cat("cannot create a scratch directory under ", fs::temp_directory_path().string()));
  }
  return std::unique_ptr<ScratchDir>(new ScratchDir(tmpl));
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void SweepOldKernelSnapshots(const fs::path& cache_dir) {
  const fs::path old = cache_dir / kOldKernelSnapshots;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(old, ec))) return;
  const std::uintmax_t removed = fs::remove_all(old, ec);
  if (ec) {
    spdlog::warn("cannot remove the old kernels snapshots in {}: {} (nothing reads them; remove them by hand)",
                 old.string(), ec.message());
    return;
  }
  spdlog::info("removed {} ({} files): old kernels snapshots; compiles take the kernels from memory now", old.string(),
               removed);
}

absl::StatusOr<std::shared_ptr<compiler::ToolkitWatch>> WatchToolkit(const fs::path& cuda_include,
                                                                     const fs::path& cache_dir) {
  compiler::ToolkitWatch::Options options;
  options.include_dir = cuda_include;
  options.memo_dir = cache_dir;
  return compiler::ToolkitWatch::Start(std::move(options));
}

absl::StatusOr<manifest::Toolchain> DetectToolchain(const fs::path& cuda_include, const fs::path& cache_dir) {
  return manifest::Toolchain::Detect(cuda_include, cache_dir);
}

std::shared_ptr<const manifest::ModuleToolchainSource> ModuleToolchainOf(const DaemonConfig& config,
                                                                         const fs::path& memo_dir,
                                                                         std::vector<std::string> bundled_builders) {
  return std::make_shared<const manifest::ModuleToolchainSource>(
      manifest::ModuleToolOptions{config.nvcc, config.host_cxx, config.tvm_ffi_root}, config.cuda_include, memo_dir,
      std::move(bundled_builders));
}

std::shared_ptr<const manifest::ModuleToolchainSource> ModuleToolchainOf(const OfflineOptions& o,
                                                                         const fs::path& memo_dir) {
  return std::make_shared<const manifest::ModuleToolchainSource>(
      o.module_tools, o.cuda_include.empty() ? fs::path(compiler::kDefaultCudaInclude) : o.cuda_include, memo_dir);
}

absl::StatusOr<std::shared_ptr<const manifest::Resolver>> LoadKernels(const fs::path& kernels_dir,
                                                                      const std::string& name, const fs::path& lock,
                                                                      const manifest::Toolchain& toolchain,
                                                                      const std::string& default_arch) {
  manifest::ServedTree served{name, nullptr, nullptr};
  if (!lock.empty()) {
    JITD_ASSIGN_OR_RETURN(manifest::KernelLock read, manifest::KernelLock::Read(lock));
    if (read.tree != name) {
      return absl::InvalidArgumentError(text::Cat("--lock ", lock.string(), " is the lock of kernel tree '", read.tree,
                                                  "', not of the tree given here ('", name,
                                                  "'): name the tree as the lock does, --kernels NAME=DIR"));
    }
    served.lock = std::make_shared<const manifest::KernelLock>(std::move(read));
  }
  JITD_ASSIGN_OR_RETURN(served.tree, manifest::KernelTree::Load(kernels_dir));
  JITD_ASSIGN_OR_RETURN(auto resolver, manifest::Resolver::Create(std::vector<manifest::ServedTree>{std::move(served)},
                                                                  toolchain, default_arch));
  return std::shared_ptr<const manifest::Resolver>(std::move(resolver));
}

absl::StatusOr<CompileStack> StartCompileStack(std::shared_ptr<const manifest::Resolver> resolver, size_t workers,
                                               size_t max_queue, std::shared_ptr<compiler::ToolkitWatch> toolkit,
                                               std::function<absl::Status(const compiler::CompileJob&)> module_check) {
  CompileStack stack;
  stack.resolver = std::move(resolver);
  stack.toolkit = toolkit;
  JITD_ASSIGN_OR_RETURN(auto scratch, ScratchDir::Create("workers"));
  stack.scratch = std::move(scratch);
  compiler::WorkerPool::Options options;
  options.worker_argv = SelfWorkerArgv();
  options.workers = workers;
  options.scratch_dir = stack.scratch->path();
  if (max_queue > 0) options.max_queue = max_queue;
  options.toolkit = std::move(toolkit);
  options.check_module_build = std::move(module_check);
  JITD_ASSIGN_OR_RETURN(auto pool, compiler::WorkerPool::Start(options));
  stack.pool = std::move(pool);
  return stack;
}

}  // namespace jitd::daemon
