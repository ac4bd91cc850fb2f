// What a warm-up compiles, whoever asks: the Warm RPC, `jitd warm`, `jitd
// bundle create` (which warms a scratch directory) and the rewarm after a
// toolkit or tree change all turn their question into a WarmAsk and run
// the WarmPlan made from it (serving::RunWarm), so that they warm the same
// items under the same rules and bounds.
//
// The rules:
//   - `all`: every instantiation of every served tree, each for every arch
//     of the plan. A locked tree's all is its lock: each entry it lists, for
//     the arch it lists it for (among the plan's archs when archs were
//     named; every one the lock lists otherwise), since anything else would
//     only be refused.
//   - specs: each spec for every arch of the plan, unless it names its own.
//   - the plan's archs: those named (each once), and the fleet's targets
//     when asked; the resolver's default arch when none is.
//   - bounds: at most kMaxItems items and kMaxArchs archs, counted before
//     anything is expanded: a request of a few hundred KB must not become
//     10^9 items in memory. Items are expanded lazily (At).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "manifest/manifest.h"

namespace jitd::serving {

struct WarmAsk {
  bool all = false;
  // When not `all`; a spec's own arch wins over the plan's.
  std::vector<manifest::KernelRequest> specs{};
  std::vector<std::string> archs{};
  // The daemon's fleet targets (each fleet arch and the PTX of the lowest).
  bool fleet = false;
};

class WarmPlan {
 public:
  // What one warm-up may ask for (docs/SECURITY.md): every instantiation
  // of a large manifest for several archs is thousands; more is split into
  // several calls. NVRTC knows a few dozen archs at most.
  static constexpr size_t kMaxItems = 100'000;
  static constexpr size_t kMaxArchs = 64;

  // INVALID_ARGUMENT for an arch the toolkit does not know or over a bound
  // (saying how to split it); FAILED_PRECONDITION for `fleet` without
  // `fleet_targets`. No specs and not `all` is an empty plan.
  static absl::StatusOr<WarmPlan> Make(WarmAsk ask, const manifest::Resolver& resolver,
                                       const std::vector<std::string>& fleet_targets);

  size_t size() const { return size_; }
  // Item i of size().
  manifest::KernelRequest At(size_t i) const;
  const std::vector<std::string>& archs() const { return archs_; }

 private:
  std::vector<std::string> archs_;
  // `all` of unlocked trees: every instantiation, without arch (x archs_).
  std::vector<manifest::KernelRequest> instantiations_;
  // `all` of locked trees: the lock's entries, each with its arch.
  std::vector<manifest::KernelRequest> locked_;
  // Specs, and the index of each spec's first item.
  std::vector<manifest::KernelRequest> specs_;
  std::vector<size_t> first_item_;
  size_t size_ = 0;
};

}  // namespace jitd::serving
