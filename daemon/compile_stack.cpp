#include "compile_stack.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <mutex>

#include "jitd/detail/text.h"

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

absl::StatusOr<manifest::Toolchain> DetectToolchain(const fs::path& cache_dir) {
  static std::once_flag once;
  static absl::StatusOr<manifest::Toolchain> toolchain = absl::UnknownError("not detected");
  std::call_once(once, [&cache_dir] {
    toolchain = manifest::Toolchain::Detect("/usr/local/cuda",
                                            cache_dir.empty() ? fs::path() : cache_dir / kToolkitFingerprintMemo);
  });
  return toolchain;
}

absl::StatusOr<std::shared_ptr<const manifest::Resolver>> LoadKernels(const fs::path& kernels_dir,
                                                                      const fs::path& snapshot_root,
                                                                      const manifest::Toolchain& toolchain,
                                                                      const std::string& default_arch) {
  auto tree = manifest::KernelTree::Load(kernels_dir, snapshot_root);
  if (!tree.ok()) return tree.status();
  auto resolver = manifest::Resolver::Create(*tree, toolchain, default_arch);
  if (!resolver.ok()) return resolver.status();
  return std::shared_ptr<const manifest::Resolver>(std::move(*resolver));
}

absl::StatusOr<CheckedKernels> LoadCheckedKernels(const fs::path& kernels_dir, const fs::path& snapshot_root,
                                                  const manifest::Toolchain& toolchain,
                                                  const std::string& default_arch) {
  auto resolver = LoadKernels(kernels_dir, snapshot_root, toolchain, default_arch);
  if (!resolver.ok()) return resolver.status();
  CheckedKernels checked;
  checked.findings = guard::CheckSources((*resolver)->tree());
  checked.resolver = *std::move(resolver);
  return checked;
}

absl::StatusOr<CompileStack> StartCompileStack(std::shared_ptr<const manifest::Resolver> resolver, size_t workers,
                                               size_t max_queue) {
  CompileStack stack;
  stack.resolver = std::move(resolver);
  auto scratch = ScratchDir::Create("workers");
  if (!scratch.ok()) return scratch.status();
  stack.scratch = std::move(*scratch);
  compiler::WorkerPool::Options options;
  options.worker_argv = SelfWorkerArgv();
  options.workers = workers;
  options.scratch_dir = stack.scratch->path();
  if (max_queue > 0) options.max_queue = max_queue;
  auto pool = compiler::WorkerPool::Start(options);
  if (!pool.ok()) return pool.status();
  stack.pool = std::move(*pool);
  return stack;
}

}  // namespace jitd::daemon
