#include "compile_stack.h"

#include <stdlib.h>
#include <unistd.h>

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

absl::StatusOr<std::unique_ptr<ScratchDir>> ScratchDir::Create(std::string_view purpose) {
  std::string tmpl = (fs::temp_directory_path() / Cat("jitd-", purpose, "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return absl::FailedPreconditionError(Cat("cannot create a scratch directory under ", fs::temp_directory_path().string()));
  }
  return std::unique_ptr<ScratchDir>(new ScratchDir(tmpl));
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

absl::StatusOr<manifest::Toolchain> DetectToolchain() {
  static std::once_flag once;
  static absl::StatusOr<manifest::Toolchain> toolchain = absl::UnknownError("not detected");
  std::call_once(once, [] { toolchain = manifest::Toolchain::Detect(); });
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

absl::StatusOr<CompileStack> StartCompileStack(std::shared_ptr<const manifest::Resolver> resolver, size_t workers) {
  CompileStack stack;
  stack.resolver = std::move(resolver);
  auto scratch = ScratchDir::Create("workers");
  if (!scratch.ok()) return scratch.status();
  stack.scratch = std::move(*scratch);
  compiler::WorkerPool::Options options;
  options.worker_argv = SelfWorkerArgv();
  options.workers = workers;
  options.scratch_dir = stack.scratch->path();
  auto pool = compiler::WorkerPool::Start(options);
  if (!pool.ok()) return pool.status();
  stack.pool = std::move(*pool);
  return stack;
}

}  // namespace jitd::daemon
