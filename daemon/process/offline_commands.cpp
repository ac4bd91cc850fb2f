#include "process/offline_commands.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <set>
#include <thread>

#include "config/config.h"
#include "guard/namespace_guard.h"
#include "jitd/base/kernel_params.h"
#include "jitd/base/progress.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "jitd/spec_file.h"
#include "process/compile_stack.h"
#include "serving/kernel_service.h"
#include "serving/warm_run.h"

namespace jitd::daemon {
namespace {

namespace fs = std::filesystem;
using text::Cat;

constexpr int kExitFindings = 1;
constexpr int kExitCannotRun = 2;

size_t WorkerCount(uint32_t requested) {
  return requested > 0 ? requested : std::max(1u, std::thread::hardware_concurrency());
}

std::vector<std::string> Archs(const OfflineOptions& o) {
  return o.archs.empty() ? std::vector<std::string>{std::string(kDefaultArch)} : o.archs;
}

int CannotRun(std::string_view what, const absl::Status& s) {
  std::fprintf(stderr, "jitd %.*s: %s\n", static_cast<int>(what.size()), what.data(), std::string(s.message()).c_str());
  return kExitCannotRun;
}

}  // namespace

int RunLint(const CommandLine& command_line) {
  spdlog::set_level(spdlog::level::warn);
  const OfflineOptions& o = command_line.offline;
  fs::path kernels_dir = o.kernels_dir.empty() ? DefaultKernelsDir() : o.kernels_dir;
  auto tree = manifest::KernelTree::Load(kernels_dir);
  if (!tree.ok()) return CannotRun("lint", tree.status());
  std::vector<guard::Finding> findings = guard::CheckSources(**tree);
  std::set<std::string> skip;
  for (const auto& f : findings) {
    std::printf("%s\n", f.ToString().c_str());
    if (!f.kernel.empty()) skip.insert(f.kernel);
  }
  size_t files = 0;
  for (const auto& [rel, content] : (*tree)->files())
    files += rel.ends_with(".cu") || rel.ends_with(".cuh") || rel.ends_with(".h");
  std::printf("jitd lint: %zu source files in %s: %zu findings\n", files, kernels_dir.c_str(), findings.size());
  if (o.source_only) return findings.empty() ? 0 : kExitFindings;

  auto toolchain = DetectToolchain(o.cuda_include.empty() ? fs::path(compiler::kDefaultCudaInclude) : o.cuda_include);
  if (!toolchain.ok()) return CannotRun("lint", toolchain.status());
  const std::vector<std::string> archs = Archs(o);
  auto resolver = manifest::Resolver::Create(*tree, *toolchain, archs.front());
  if (!resolver.ok()) return CannotRun("lint", resolver.status());
  std::shared_ptr<const manifest::Resolver> shared(std::move(*resolver));
  const size_t workers = WorkerCount(o.workers);
  auto stack = StartCompileStack(shared, workers);
  if (!stack.ok()) return CannotRun("lint", stack.status());

  size_t total = 0;
  for (const auto& k : (*tree)->manifest().kernels) {
    if (!skip.count(k.name)) total += manifest::Manifest::Instantiations(k).size() * archs.size();
  }
  Progress progress("compile-all", total);
  auto compiled = guard::CompileAll(
      *shared, archs,
      [&](const compiler::CompileJob& job) { return stack->pool->Compile(job, compiler::Priority::kLive); }, workers,
      [&](size_t, size_t, const std::string& kernel, const std::string& params, const std::string& arch, bool ok) {
        progress.Done(ok ? "ok" : "failed", text::Instantiation(kernel, params, arch));
      },
      skip);
  progress.Finish();
  for (const auto& f : compiled) std::printf("%s\n", f.ToString().c_str());
  std::printf("jitd lint: %zu instantiations compiled for %zu arch(s) with NVRTC %s in %.1f s: %zu findings%s\n", total,
              archs.size(), toolchain->nvrtc_version.c_str(), progress.elapsed_s(), compiled.size(),
              skip.empty() ? "" : Cat(" (", skip.size(), " kernels with source findings not compiled)").c_str());
  return findings.empty() && compiled.empty() ? 0 : kExitFindings;
}

namespace {

// What `jitd warm` warms: every instantiation of the manifest (--all) or
// every spec of --manifest, for each of `archs` unless the spec names one.
absl::StatusOr<std::vector<manifest::KernelRequest>> WarmRequests(const OfflineOptions& o,
                                                                  const manifest::Resolver& resolver,
                                                                  const std::vector<std::string>& archs) {
  std::vector<manifest::KernelRequest> requests;
  if (o.all) {
    for (const auto& k : resolver.tree().manifest().kernels) {
      for (const auto& params : manifest::Manifest::Instantiations(k)) {
        for (const auto& arch : archs) requests.push_back({k.name, params, arch, {}});
      }
    }
    return requests;
  }
  JITD_ASSIGN_OR_RETURN(auto specs, LoadSpecFile(o.manifest));
  for (const auto& spec : specs) {
    manifest::KernelRequest r{spec.kernel(),
                              {spec.params().begin(), spec.params().end()},
                              spec.arch(),
                              {spec.options().begin(), spec.options().end()}};
    if (!r.arch.empty()) {
      requests.push_back(r);
      continue;
    }
    for (const auto& arch : archs) {
      r.arch = arch;
      requests.push_back(r);
    }
  }
  return requests;
}

}  // namespace

int RunWarm(const CommandLine& command_line) {
  // The progress lines say what each compile did; the per-compile log lines
  // a daemon writes would only repeat them.
  spdlog::set_level(spdlog::level::warn);
  const OfflineOptions& o = command_line.offline;
  fs::path kernels_dir = o.kernels_dir.empty() ? DefaultKernelsDir() : o.kernels_dir;
  const std::vector<std::string> archs = Archs(o);
  cache::CacheOptions cache_options;
  cache_options.dir = o.cache_dir;
  // A warm-up writer adds; the budget is the serving daemon's to enforce.
  cache_options.max_bytes = 0;
  auto cache = cache::Cache::Open(cache_options);
  if (!cache.ok()) return CannotRun("warm", cache.status());
  SweepOldKernelSnapshots((*cache)->dir());
  auto toolkit =
      WatchToolkit(o.cuda_include.empty() ? fs::path(compiler::kDefaultCudaInclude) : o.cuda_include, (*cache)->dir());
  if (!toolkit.ok()) return CannotRun("warm", toolkit.status());
  auto toolchain = manifest::Toolchain::FromIdentity((*toolkit)->identity());
  if (!toolchain.ok()) return CannotRun("warm", toolchain.status());
  auto resolver = LoadKernels(kernels_dir, *toolchain, archs.front());
  if (!resolver.ok()) return CannotRun("warm", resolver.status());

  absl::StatusOr<std::vector<manifest::KernelRequest>> requests = WarmRequests(o, **resolver, archs);
  if (!requests.ok()) return CannotRun("warm", requests.status());

  const size_t workers = WorkerCount(o.workers);
  // A toolkit change during the warm-up fails the compiles that saw it
  // (UNAVAILABLE, reported as failures): a warm-up never stores old keys
  // with new bytes; run it again for the new toolkit's keys.
  auto stack = StartCompileStack(*resolver, workers, 0, *toolkit);
  if (!stack.ok()) return CannotRun("warm", stack.status());
  serving::KernelService::Options service_options;
  service_options.hot_cache_bytes = 0;  // nothing is served: keep no cubins in memory
  serving::KernelService service(*resolver, cache->get(), stack->pool.get(), service_options);

  std::printf("jitd warm: %zu instantiations into %s with %zu workers\n", requests->size(), (*cache)->dir().c_str(),
              workers);
  std::fflush(stdout);
  Progress progress("warm", requests->size());
  std::vector<std::string> failures;
  serving::WarmRunOptions run;
  // One more in flight than workers keeps every worker busy while a result
  // is being stored.
  run.concurrency = workers + 1;
  run.call.priority = compiler::Priority::kWarm;
  const serving::WarmCounts counts = serving::RunWarm(
      service, requests->size(), [&](size_t i) { return (*requests)[i]; }, run,
      [&](size_t i, const absl::StatusOr<serving::KernelAnswer>& answer, serving::WarmOutcome outcome,
          const serving::WarmCounts&) {
        const manifest::KernelRequest& r = (*requests)[i];
        const std::string what =
            text::Instantiation(r.kernel, answer.ok() ? answer->params : CanonicalParams(r.params), r.arch, r.options);
        if (outcome == serving::WarmOutcome::kFailed) {
          const std::string why(answer.status().message());
          progress.Done("failed", what, why.substr(0, why.find('\n')));
          failures.push_back(Cat(what, ": ", why));
        } else if (outcome == serving::WarmOutcome::kCompiled) {
          progress.Done("compiled", what, Cat(static_cast<int>(answer->entry->meta.compile_ms), " ms"),
                        answer->entry->meta.compile_ms / 1000);
        } else {
          progress.Done("cached", what, {}, 0.0);
        }
        return true;
      });
  progress.Finish();
  if (auto s = (*cache)->Flush(); !s.ok()) spdlog::warn("flushing the cache index: {}", s.ToString());
  for (const auto& f : failures) std::printf("failed: %s\n", f.c_str());
  std::printf("jitd warm: %zu instantiations in %.1f s: %u compiled, %u already cached, %zu failed\n", requests->size(),
              progress.elapsed_s(), counts.compiled, counts.cached, failures.size());
  return failures.empty() ? 0 : kExitFindings;
}

}  // namespace jitd::daemon
