#include "commands/offline_commands.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <thread>

#include "app/compile_stack.h"
#include "config/config.h"
#include "jitd/base/kernel_params.h"
#include "jitd/base/progress.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "jitd/spec_file.h"
#include "serving/kernel_service.h"
#include "serving/kernel_trees.h"
#include "serving/warm_plan.h"
#include "serving/warm_run.h"

namespace jitd::daemon {

namespace fs = std::filesystem;
using offline::CannotRun;
using offline::kExitFindings;
using text::Cat;

size_t offline::WorkerCount(uint32_t requested) {
  return requested > 0 ? requested : std::max(1u, std::thread::hardware_concurrency());
}

std::vector<std::string> offline::Archs(const OfflineOptions& o) {
  return o.archs.empty() ? std::vector<std::string>{std::string(kDefaultArch)} : o.archs;
}

int offline::CannotRun(std::string_view what, const absl::Status& s) {
  std::fprintf(stderr, "jitd %.*s: %s\n", static_cast<int>(what.size()), what.data(), std::string(s.message()).c_str());
  return kExitCannotRun;
}

namespace {

// What `jitd warm` asks for: every instantiation of the manifest (--all),
// every entry of --lock (a locked tree's all is its lock, each entry for
// its own arch unless --arch names some), or every spec of --manifest, for
// each --arch unless the spec names one. serving::WarmPlan makes the items.
absl::StatusOr<serving::WarmAsk> WarmAskOf(const OfflineOptions& o) {
  serving::WarmAsk ask;
  ask.archs = o.archs;
  ask.all = o.all;
  if (ask.all) return ask;
  JITD_ASSIGN_OR_RETURN(auto specs, LoadSpecFile(o.manifest));
  for (const auto& spec : specs) {
    ask.specs.push_back({spec.kernel(),
                         {spec.params().begin(), spec.params().end()},
                         spec.arch(),
                         {spec.options().begin(), spec.options().end()}});
  }
  return ask;
}

// The trees and locks as the daemon serves them: one tree as it always
// was; several through serving::KernelTrees, which also guards each, so
// that a tree the daemon would refuse is not warmed (said, not fatal).
absl::StatusOr<std::shared_ptr<const manifest::Resolver>> OfflineKernels(const OfflineOptions& o,
                                                                         const manifest::Toolchain& toolchain,
                                                                         const std::string& arch) {
  if (o.trees.size() == 1 && o.locks.size() <= 1) {
    return LoadKernels(o.trees.front().dir, o.trees.front().name, o.locks.empty() ? fs::path() : o.locks.front(),
                       toolchain, arch);
  }
  serving::KernelTrees trees(serving::KernelTrees::Options{
      .sources = o.trees, .locks = o.locks, .allow_guard_findings = false, .default_arch = arch});
  JITD_ASSIGN_OR_RETURN(serving::KernelTrees::Loaded loaded, trees.Load(toolchain, nullptr));
  for (const std::string& refused : loaded.refused) {
    std::fprintf(stderr, "jitd warm: not warming %s (the daemon refuses it too)\n", refused.c_str());
  }
  return loaded.resolver;
}

}  // namespace

int RunWarm(const CommandLine& command_line) {
  // The progress lines say what each compile did; the per-compile log lines
  // a daemon writes would only repeat them.
  spdlog::set_level(spdlog::level::warn);
  const OfflineOptions& o = command_line.offline;
  const std::vector<std::string> archs = offline::Archs(o);
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
  toolchain->modules = ModuleToolchainOf(o, (*cache)->dir());
  // With --lock, the tree locked by it: every entry is resolved against its
  // locked key, so a warm-up of sources or a toolkit other than the linted
  // ones fails those entries instead of filling the cache with cubins the
  // locked daemon would refuse.
  auto resolver = OfflineKernels(o, *toolchain, archs.front());
  if (!resolver.ok()) return CannotRun("warm", resolver.status());

  absl::StatusOr<serving::WarmAsk> ask = WarmAskOf(o);
  if (!ask.ok()) return CannotRun("warm", ask.status());
  absl::StatusOr<serving::WarmPlan> plan = serving::WarmPlan::Make(*std::move(ask), **resolver, {});
  if (!plan.ok()) return CannotRun("warm", plan.status());

  const size_t workers = offline::WorkerCount(o.workers);
  std::printf("jitd warm: %zu instantiations into %s with %zu workers\n", plan->size(), (*cache)->dir().c_str(),
              workers);
  std::fflush(stdout);
  // Drawn now ("0/N") and timed from here: the workers' start and the first
  // compile count, as a person waiting sees them.
  Progress progress("warm", plan->size());
  // A toolkit change during the warm-up fails the compiles that saw it
  // (UNAVAILABLE, reported as failures): a warm-up never stores old keys
  // with new bytes; run it again for the new toolkit's keys.
  auto stack = StartCompileStack(*resolver, workers, 0, *toolkit);
  if (!stack.ok()) return CannotRun("warm", stack.status());
  serving::KernelService::Options service_options;
  service_options.hot_cache_bytes = 0;  // nothing is served: keep no cubins in memory
  serving::KernelService service(*resolver, cache->get(), stack->pool.get(), service_options);

  std::vector<std::string> failures;
  serving::WarmRunOptions run;
  // One more in flight than workers keeps every worker busy while a result
  // is being stored.
  run.concurrency = workers + 1;
  run.call.priority = compiler::Priority::kWarm;
  const serving::WarmCounts counts = serving::RunWarm(
      service, plan->size(), [&](size_t i) { return plan->At(i); }, run,
      [&](size_t i, const absl::StatusOr<serving::KernelAnswer>& answer, serving::WarmOutcome outcome,
          const serving::WarmCounts&) {
        const manifest::KernelRequest r = plan->At(i);
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
  std::printf("jitd warm: %zu instantiations in %.1f s: %u compiled, %u already cached, %zu failed\n", plan->size(),
              progress.elapsed_s(), counts.compiled, counts.cached, failures.size());
  return failures.empty() ? 0 : kExitFindings;
}

}  // namespace jitd::daemon
