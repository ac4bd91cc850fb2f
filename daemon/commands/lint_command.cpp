// `jitd lint`: the namespace guard over one kernel tree as a CI step. The
// findings are collected into a LintReport and written in the --format
// asked for; a clean lint may also write its lock (--write-lock).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <set>
#include <tuple>

#include "app/compile_stack.h"
#include "commands/lint_report.h"
#include "commands/offline_commands.h"
#include "config/config.h"
#include "guard/namespace_guard.h"
#include "jitd/base/files.h"
#include "jitd/base/kernel_params.h"
#include "jitd/base/progress.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "manifest/lock.h"

namespace jitd::daemon {
namespace {

namespace fs = std::filesystem;
using text::Cat;

// offline::CannotRun with its reason shown as SafeText: a reason may quote
// a file name or manifest text of the tree, and goes where a CI runner
// reads commands.
int CannotRun(std::string_view what, const absl::Status& s) {
  return offline::CannotRun(what, absl::Status(s.code(), SafeText(std::string(s.message()))));
}

// json and junit are parsed from stdout, which must then carry the document
// alone: fd 1 is pointed at stderr for the rest of the run (log lines, the
// compile workers started later, anything else that writes there) and the
// document goes to a copy of the real stdout, returned here.
std::FILE* DivertStdout() {
  std::fflush(stdout);
  const int document = dup(STDOUT_FILENO);
  if (document < 0) return stdout;
  if (dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    close(document);
    return stdout;
  }
  std::FILE* out = fdopen(document, "w");
  return out != nullptr ? out : stdout;
}

// The namespace guard's half: the source findings and what it read.
LintReport SourceReport(const OfflineOptions& o, const fs::path& kernels_dir, const manifest::KernelTree& tree) {
  LintReport report;
  report.kernels_dir = kernels_dir.string();
  report.kernel_namespace = tree.manifest().kernel_namespace;
  report.namespace_note = manifest::UndeclaredNamespaceNote(tree.manifest());
  report.archs = offline::Archs(o);
  for (guard::Finding& f : guard::CheckSources(tree)) {
    if (!f.kernel.empty()) report.skipped_kernels.insert(f.kernel);
    report.findings.push_back({LintReport::Check::kSource, std::move(f)});
  }
  report.source_files = guard::ScannedFiles(tree);
  for (const auto& k : tree.manifest().kernels) {
    const bool skipped = report.skipped_kernels.count(k.name) > 0;
    for (const auto& params : manifest::Manifest::Instantiations(k)) {
      for (const auto& arch : report.archs) {
        report.instantiations.push_back({k.name, CanonicalParams(params), arch, false, skipped});
      }
    }
  }
  return report;
}

// The compile-all half: every instantiation not skipped, compiled for its
// arch. Returns the resolver the keys come from (the tree under its serving
// name, so that a lock's keys are the ones the daemon computes).
absl::StatusOr<std::shared_ptr<const manifest::Resolver>> RunCompileAll(
    const OfflineOptions& o, std::shared_ptr<const manifest::KernelTree> tree, LintReport& report) {
  JITD_ASSIGN_OR_RETURN(
      manifest::Toolchain toolchain,
      DetectToolchain(o.cuda_include.empty() ? fs::path(compiler::kDefaultCudaInclude) : o.cuda_include));
  toolchain.modules = ModuleToolchainOf(o, {});
  report.compiled = true;
  report.nvrtc_version = toolchain.nvrtc_version;
  report.modules = std::any_of(tree->manifest().kernels.begin(), tree->manifest().kernels.end(),
                               [](const manifest::KernelDef& k) { return k.is_module(); });
  std::vector<manifest::ServedTree> trees;
  trees.push_back({o.kernels_name, std::move(tree), nullptr});
  JITD_ASSIGN_OR_RETURN(auto resolver,
                        manifest::Resolver::Create(std::move(trees), std::move(toolchain), report.archs.front()));
  std::shared_ptr<const manifest::Resolver> shared(std::move(resolver));
  report.parallelism = offline::WorkerCount(o.workers);
  JITD_ASSIGN_OR_RETURN(auto stack, StartCompileStack(shared, report.parallelism));

  const size_t total = report.instantiations.size() - report.CountInstantiations(false, true);
  Progress progress("compile-all", total);
  std::vector<guard::Finding> found = guard::CompileAll(
      *shared, report.archs,
      [&](const compiler::CompileJob& job) { return stack.pool->Compile(job, compiler::Priority::kLive); },
      report.parallelism,
      [&](size_t, size_t, const std::string& kernel, const std::string& params, const std::string& arch, bool ok) {
        // Names are checked at load (manifest.cpp); escaped here all the same,
        // since these lines go where a CI runner reads commands.
        progress.Done(ok ? "ok" : "failed", SafeLine(text::Instantiation(kernel, params, arch)));
      },
      report.skipped_kernels);
  progress.Finish();
  report.compile_s = progress.elapsed_s();
  for (guard::Finding& f : found) report.findings.push_back({LintReport::Check::kCompile, std::move(f)});
  for (LintReport::Instantiation& inst : report.instantiations) {
    inst.ok = !inst.skipped && report.FindingsOf(inst).empty();
  }
  return shared;
}

// The lock of a clean lint: every instantiation x arch with the key the
// resolver gives it, for a deployment to pin.
absl::StatusOr<manifest::KernelLock> MakeLock(const OfflineOptions& o, const manifest::Resolver& resolver,
                                              const LintReport& report) {
  manifest::KernelLock lock;
  lock.tree = o.kernels_name;
  lock.kernel_namespace = report.kernel_namespace;
  lock.nvrtc_version = report.nvrtc_version;
  lock.tree_fingerprint = resolver.tree().fingerprint();
  const auto& kernels = resolver.tree().manifest().kernels;
  for (const auto& k : kernels) {
    for (const auto& params : manifest::Manifest::Instantiations(k)) {
      for (const auto& arch : report.archs) {
        JITD_ASSIGN_OR_RETURN(manifest::ResolvedKernel resolved, resolver.Resolve({k.name, params, arch, {}}));
        lock.entries.push_back({k.name, resolved.params, arch, resolved.key});
      }
    }
  }
  auto order = [](const manifest::LockEntry& e) { return std::tie(e.kernel, e.params, e.arch); };
  std::sort(lock.entries.begin(), lock.entries.end(),
            [&](const auto& a, const auto& b) { return order(a) < order(b); });
  // An arch given twice (--arch sm_90 --arch sm_90) is one entry.
  lock.entries.erase(std::unique(lock.entries.begin(), lock.entries.end(),
                                 [&](const auto& a, const auto& b) { return order(a) == order(b); }),
                     lock.entries.end());
  return lock;
}

// --write-lock after the lint: only a clean lint is locked (a lock pins
// what was proven, and a lint with findings proved nothing).
int WriteLock(const OfflineOptions& o, const manifest::Resolver* resolver, const LintReport& report, std::FILE* say) {
  if (!report.ok() || resolver == nullptr) {
    std::fprintf(say, "jitd lint: %zu findings: %s not written (a lock is written only after a clean lint)\n",
                 report.findings.size(), o.write_lock.c_str());
    return offline::kExitFindings;
  }
  absl::StatusOr<manifest::KernelLock> lock = MakeLock(o, *resolver, report);
  if (!lock.ok()) return CannotRun("lint --write-lock", lock.status());
  files::AtomicWrite how;
  how.mode = 0644;  // read by the daemon's user, which is often not the linter's
  if (absl::Status s = files::WriteFileAtomically(o.write_lock, lock->ToToml(), how); !s.ok()) {
    return CannotRun("lint --write-lock", s);
  }
  std::fprintf(say, "jitd lint: wrote %s: %zu instantiations locked (serve exactly them: jitd --lock %s)\n",
               o.write_lock.c_str(), lock->entries.size(), o.write_lock.c_str());
  return 0;
}

void Write(LintFormat format, const LintReport& report, std::FILE* out) {
  std::string text;
  switch (format) {
    case LintFormat::kText:
      if (report.compiled) text = LintTextCompile(report);  // the sources' half went out before the compiles
      break;
    case LintFormat::kJson:
      text = LintJson(report);
      break;
    case LintFormat::kJunit:
      text = LintJunit(report);
      break;
    case LintFormat::kGithub:
      text = LintGithub(report);
      break;
  }
  std::fputs(text.c_str(), out);
  std::fflush(out);
}

}  // namespace

int RunLint(const CommandLine& command_line) {
  spdlog::set_level(spdlog::level::warn);
  const OfflineOptions& o = command_line.offline;
  const bool document = o.format == LintFormat::kJson || o.format == LintFormat::kJunit;
  std::FILE* out = document ? DivertStdout() : stdout;
  // What is not the report (the lock's note) goes where it cannot break a document.
  std::FILE* say = document ? stderr : stdout;
  const fs::path kernels_dir = o.kernels_dir.empty() ? DefaultKernelsDir() : o.kernels_dir;
  auto tree = manifest::KernelTree::Load(kernels_dir);
  if (!tree.ok()) return CannotRun("lint", tree.status());
  LintReport report = SourceReport(o, kernels_dir, **tree);
  if (o.format == LintFormat::kText) {
    std::fputs(LintTextSources(report).c_str(), out);
    std::fflush(out);
  }
  std::shared_ptr<const manifest::Resolver> resolver;
  if (!o.source_only) {
    auto compiled = RunCompileAll(o, *tree, report);
    if (!compiled.ok()) return CannotRun("lint", compiled.status());
    resolver = *std::move(compiled);
  }
  Write(o.format, report, out);
  if (!o.write_lock.empty()) {
    if (const int rc = WriteLock(o, resolver.get(), report, say); rc != 0) return rc;
  }
  return report.ok() ? 0 : offline::kExitFindings;
}

}  // namespace jitd::daemon
