#include "serving/kernel_trees.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "guard/namespace_guard.h"
#include "jitd/base/error_reason.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "manifest/lock.h"

namespace jitd::serving {
namespace {

using text::Cat;

std::string Label(const manifest::TreeSource& source) {
  return source.name.empty() ? Cat("kernel tree ", source.dir.string())
                             : Cat("kernel tree ", source.name, " (", source.dir.string(), ")");
}

const manifest::ServedTree* FindTree(const manifest::Resolver* resolver, const std::string& name) {
  if (resolver == nullptr) return nullptr;
  for (const manifest::ServedTree& t : resolver->trees()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace

KernelTrees::KernelTrees(Options options) : options_(std::move(options)) {
  for (const manifest::TreeSource& source : options_.sources) {
    State state;
    state.source = source;
    states_.push_back(std::move(state));
  }
}

absl::StatusOr<manifest::ServedTree> KernelTrees::LoadOne(
    const manifest::TreeSource& source, const std::vector<std::shared_ptr<const manifest::KernelLock>>& locks) const {
  absl::StatusOr<std::shared_ptr<const manifest::KernelTree>> tree = manifest::KernelTree::Load(source.dir);
  if (!tree.ok()) {
    return absl::Status(tree.status().code(),
                        Cat("cannot load the kernels in ", source.dir.string(), ": ", tree.status().message()));
  }
  const std::vector<guard::Finding> findings = guard::CheckSources(**tree);
  const std::string where = source.name.empty() ? "" : Cat("[tree ", source.name, "] ");
  for (const guard::Finding& finding : findings) {
    if (options_.allow_guard_findings) {
      spdlog::warn("namespace guard: {}{}", where, finding.ToString());
    } else {
      spdlog::error("namespace guard: {}{}", where, finding.ToString());
    }
  }
  if (!findings.empty() && !options_.allow_guard_findings) {
    const std::string note = manifest::UndeclaredNamespaceNote((*tree)->manifest());
    return absl::FailedPreconditionError(Cat(
        "the kernels in ", source.dir.string(), " fail the namespace guard's source check with ", findings.size(),
        " finding(s) (namespace ", (*tree)->manifest().kernel_namespace, note.empty() ? "" : Cat(": ", note),
        "), logged above (`jitd lint --kernels ", source.name.empty() ? "" : Cat(source.name, "="), source.dir.string(),
        "` lists them too); fix the sources, or start with --allow-guard-findings (allow_guard_findings = true "
        "in the config file) to serve them anyway"));
  }
  if (!findings.empty()) {
    spdlog::warn("serving kernels with {} namespace guard finding(s) (--allow-guard-findings)", findings.size());
  }
  manifest::ServedTree served{source.name, *std::move(tree), nullptr};
  for (const auto& lock : locks) {
    if (lock->tree == source.name) served.lock = lock;
  }
  return served;
}

absl::StatusOr<std::vector<std::shared_ptr<const manifest::KernelLock>>> KernelTrees::ReadLocks() const {
  std::vector<std::shared_ptr<const manifest::KernelLock>> locks;
  std::map<std::string, std::filesystem::path> lock_of_tree;
  for (const std::filesystem::path& file : options_.locks) {
    absl::StatusOr<manifest::KernelLock> lock = manifest::KernelLock::Read(file);
    if (!lock.ok())
      return absl::Status(lock.status().code(), Cat("--lock ", file.string(), ": ", lock.status().message()));
    const auto source = std::find_if(options_.sources.begin(), options_.sources.end(),
                                     [&](const manifest::TreeSource& s) { return s.name == lock->tree; });
    if (source == options_.sources.end()) {
      return absl::InvalidArgumentError(
          Cat("--lock ", file.string(), " is the lock of kernel tree '", lock->tree,
              "', which is not served (serve it with --kernels ", lock->tree.empty() ? "DIR" : Cat(lock->tree, "=DIR"),
              ", or lint it under the name it is served by: jitd lint --kernels NAME=DIR --write-lock FILE)"));
    }
    // One lock per tree: a second would silently replace the first, and the
    // tree would serve what neither operator meant.
    if (auto [first, inserted] = lock_of_tree.emplace(lock->tree, file); !inserted) {
      return absl::InvalidArgumentError(Cat(
          "--lock ", first->second.string(), " and --lock ", file.string(), " are both locks of the ", Label(*source),
          ": a tree is served by exactly one lock; give one of them (jitd lint --kernels ",
          lock->tree.empty() ? "DIR" : Cat(lock->tree, "=DIR"), " --write-lock FILE writes one for the whole tree)"));
    }
    locks.push_back(std::make_shared<const manifest::KernelLock>(*std::move(lock)));
  }
  return locks;
}

absl::StatusOr<KernelTrees::Loaded> KernelTrees::Load(const manifest::Toolchain& toolchain,
                                                      const manifest::Resolver* previous) {
  JITD_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<const manifest::KernelLock>> locks, ReadLocks());
  std::vector<manifest::ServedTree> trees;
  std::vector<State> states;
  Loaded loaded;
  absl::Status last_error;
  {
    std::lock_guard lock(mu_);
    states = states_;
  }
  for (size_t i = 0; i < options_.sources.size(); ++i) {
    const manifest::TreeSource& source = options_.sources[i];
    State& state = states[i];
    absl::StatusOr<manifest::ServedTree> tree = LoadOne(source, locks);
    if (tree.ok()) {
      state.error.clear();
      trees.push_back(*std::move(tree));
      continue;
    }
    std::string why = Cat(Label(source), ": ", tree.status().message());
    state.error = std::string(tree.status().message());
    last_error = tree.status();
    if (previous != nullptr) ++state.refused_reloads;
    if (const manifest::ServedTree* before = FindTree(previous, source.name)) {
      text::Append(why, "; still serving the previous kernels (fingerprint ", before->tree->fingerprint().substr(0, 12),
                   ")");
      trees.push_back(*before);
    }
    // At a start that goes on without it, the log is where this is said;
    // otherwise the caller's error says it.
    if (previous == nullptr && options_.sources.size() > 1) spdlog::error("{}", why);
    loaded.refused.push_back(std::move(why));
  }
  if (trees.empty()) {
    if (options_.sources.size() == 1) return last_error;
    return absl::FailedPreconditionError(Cat("no kernel tree can be served: ", text::Join(loaded.refused, "; ")));
  }
  // Shared headers are findings of two trees at once: said, not refused
  // (where the trees' rules differ, one of them has a namespace finding on
  // that header and is refused by it already).
  std::vector<std::pair<std::string, const manifest::KernelTree*>> named;
  for (const manifest::ServedTree& t : trees) named.emplace_back(t.name, t.tree.get());
  for (const guard::Finding& finding : guard::CheckTreesShareNoHeaders(named)) {
    spdlog::warn("namespace guard: {}", finding.ToString());
  }
  JITD_ASSIGN_OR_RETURN(std::unique_ptr<manifest::Resolver> resolver,
                        manifest::Resolver::Create(trees, toolchain, options_.default_arch));
  loaded.resolver = std::move(resolver);
  for (State& state : states) {
    const manifest::ServedTree* served = FindTree(loaded.resolver.get(), state.source.name);
    state.serving = served != nullptr;
    if (served == nullptr) continue;
    state.kernels = served->tree->manifest().kernels.size();
    state.fingerprint = served->tree->fingerprint();
    state.kernel_namespace = served->tree->manifest().kernel_namespace;
    state.lock = served->lock != nullptr ? served->lock->origin : "";
    state.locked = served->lock != nullptr ? served->lock->entries.size() : 0;
  }
  std::lock_guard lock(mu_);
  states_ = std::move(states);
  return loaded;
}

std::vector<KernelTrees::State> KernelTrees::states() const {
  std::lock_guard lock(mu_);
  return states_;
}

absl::Status KernelTrees::ExplainNotFound(const std::string& kernel, absl::Status not_found) const {
  std::vector<std::string> refused;
  const size_t slash = kernel.find('/');
  for (const State& state : states()) {
    if (state.serving) continue;
    if (slash != std::string::npos && kernel.compare(0, slash, state.source.name) == 0) {
      return WithReason(absl::NotFoundError(Cat("kernel tree '", state.source.name, "' (", state.source.dir.string(),
                                                ") was refused when it was loaded, so ", kernel, " is not served: ",
                                                state.error, " (fix it and send the daemon SIGHUP)")),
                        kReasonTreeRefused);
    }
    refused.push_back(Cat(state.source.name, " (", state.error.substr(0, 200), ")"));
  }
  if (refused.empty() || slash != std::string::npos) return not_found;
  return absl::NotFoundError(Cat(not_found.message(),
                                 "; kernel tree(s) refused when loaded, whose kernels are not "
                                 "served: ",
                                 text::Join(refused, "; ")));
}

std::optional<bool> KernelTrees::Serving(std::string_view name) const {
  for (const State& state : states()) {
    if (state.source.name == name) return state.serving;
  }
  return std::nullopt;
}

std::string KernelTrees::RefusedSummary() const {
  std::vector<std::string> refused;
  for (const State& state : states()) {
    if (!state.serving) refused.push_back(Cat(state.source.name, " (", state.error.substr(0, 200), ")"));
  }
  if (refused.empty()) return "";
  return Cat(refused.size(), " kernel tree", refused.size() == 1 ? "" : "s", " refused: ", text::Join(refused, "; "));
}

std::string KernelTrees::Summary(const manifest::Resolver& resolver) {
  std::vector<std::string> parts;
  for (const manifest::ServedTree& t : resolver.trees()) {
    parts.push_back(Cat(t.name.empty() ? "" : Cat(t.name, ": "), t.tree->manifest().kernels.size(),
                        " kernels, fingerprint ", t.tree->fingerprint().substr(0, 12)));
  }
  return text::Join(parts, "; ");
}

std::string KernelTrees::Fingerprints(const manifest::Resolver& resolver) {
  std::vector<std::string> parts;
  for (const manifest::ServedTree& t : resolver.trees()) {
    parts.push_back(Cat(t.name.empty() ? "" : Cat(t.name, " "), t.tree->fingerprint().substr(0, 12)));
  }
  return text::Join(parts, ", ");
}

std::string KernelTrees::Describe(const manifest::Resolver& resolver) {
  std::vector<std::string> parts;
  for (const manifest::ServedTree& t : resolver.trees()) {
    parts.push_back(Cat(t.name.empty() ? "" : Cat(t.name, ": "), t.tree->manifest().kernels.size(), " kernels from ",
                        t.tree->source_dir().string(), ", fingerprint ", t.tree->fingerprint().substr(0, 12),
                        t.lock != nullptr ? Cat(", locked by ", t.lock->origin) : ""));
  }
  return text::Join(parts, "; ");
}

}  // namespace jitd::serving
