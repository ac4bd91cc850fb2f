// The kernel trees a daemon serves (`--kernels [NAME=]DIR`, repeatable, and
// `--lock FILE`): each read, checked by the namespace guard under its own
// manifest's namespace rule and locked on its own, so that a tree that fails
// is refused alone while the others keep serving.
//
//   start    every tree is read; one that fails is refused (logged, and in
//            Stats with why). The start fails only when no tree is left, or
//            when a lock names no configured tree (a typo that would
//            otherwise leave a tree unlocked).
//   SIGHUP   every tree is read again; one that fails keeps serving what it
//            served before (the previous ServedTree, bytes and keys), the
//            others are replaced.
//
// Thread safety: Load is called by one thread at a time (start, then the
// signal thread); states() may be called from any thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "manifest/manifest.h"

namespace jitd::serving {

class KernelTrees {
 public:
  struct Options {
    std::vector<manifest::TreeSource> sources;
    std::vector<std::filesystem::path> locks;
    // Serve trees with namespace guard findings (logged as warnings).
    bool allow_guard_findings = false;
    std::string default_arch;
  };

  // What Stats reports of one tree.
  struct State {
    manifest::TreeSource source;
    bool serving = false;
    std::string error{};  // why it (or its last reload) was refused
    size_t kernels = 0;
    std::string fingerprint;
    std::string kernel_namespace;
    std::string lock;  // the lock file, "" when not locked
    size_t locked = 0;
    uint64_t refused_reloads = 0;
  };

  explicit KernelTrees(Options options);

  struct Loaded {
    std::shared_ptr<const manifest::Resolver> resolver;
    // One line per tree refused by this load ("tree NAME (DIR): why").
    std::vector<std::string> refused;
  };
  // Reads every tree under `toolchain`. `previous` is the resolver served
  // now (SIGHUP), or null (start). Errors: FAILED_PRECONDITION (or the
  // loading error) when no tree can be served, naming each tree's reason;
  // INVALID_ARGUMENT for a lock that names no configured tree.
  absl::StatusOr<Loaded> Load(const manifest::Toolchain& toolchain, const manifest::Resolver* previous);

  std::vector<State> states() const;
  // The answer for a request of `kernel` that resolved to `not_found`: when
  // it names a tree ("TREE/kernel") refused at start, NOT_FOUND saying so
  // and why (reason TREE_REFUSED); when it is a bare name and trees were
  // refused, `not_found` with a note naming them; else `not_found`.
  absl::Status ExplainNotFound(const std::string& kernel, absl::Status not_found) const;
  // Whether tree `name` is served now; nullopt for a name no --kernels gives.
  std::optional<bool> Serving(std::string_view name) const;
  // "1 kernel tree refused: acme (namespace findings ...)"; "" when none is.
  std::string RefusedSummary() const;
  // "7 kernels from DIR, fingerprint F" for one tree; one such part per
  // tree ("sglang: …; team: …") for several.
  static std::string Describe(const manifest::Resolver& resolver);
  // "N kernels, fingerprint F" per tree, and the fingerprints alone: what a
  // reload log line compares.
  static std::string Summary(const manifest::Resolver& resolver);
  static std::string Fingerprints(const manifest::Resolver& resolver);

 private:
  // Every --lock file, read and matched to a served tree; at most one lock
  // a tree.
  absl::StatusOr<std::vector<std::shared_ptr<const manifest::KernelLock>>> ReadLocks() const;
  // One tree read, guarded and locked, or why it is refused.
  absl::StatusOr<manifest::ServedTree> LoadOne(
      const manifest::TreeSource& source, const std::vector<std::shared_ptr<const manifest::KernelLock>>& locks) const;

  const Options options_;
  mutable std::mutex mu_;
  std::vector<State> states_;  // guarded by mu_, as options_.sources
};

}  // namespace jitd::serving
