#include "serving/warm_plan.h"

#include <algorithm>
#include <optional>

#include "jitd/base/kernel_params.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "manifest/lock.h"

namespace jitd::serving {
namespace {

using text::Cat;

void AddOnce(std::vector<std::string>& archs, const std::string& arch) {
  if (std::find(archs.begin(), archs.end(), arch) == archs.end()) archs.push_back(arch);
}

std::string Qualified(const manifest::ServedTree& tree, const std::string& kernel) {
  return tree.name.empty() ? kernel : Cat(tree.name, "/", kernel);
}

// At most how many items `all` makes, counted without expanding anything
// (a tree is bounded, several trees and archs multiply it).
uint64_t AllAtMost(const manifest::Resolver& resolver, size_t archs) {
  uint64_t at_most = 0;
  for (const manifest::ServedTree& tree : resolver.trees()) {
    if (tree.lock != nullptr) {
      at_most += tree.lock->entries.size();
      continue;
    }
    uint64_t count = 0;
    for (const manifest::KernelDef& kernel : tree.tree->manifest().kernels) {
      count += std::min<uint64_t>(manifest::InstantiationCount(kernel), WarmPlan::kMaxItems + 1);
    }
    at_most += count * archs;
  }
  return at_most;
}

}  // namespace

absl::StatusOr<WarmPlan> WarmPlan::Make(WarmAsk ask, const manifest::Resolver& resolver,
                                        const std::vector<std::string>& fleet_targets) {
  WarmPlan plan;
  if (ask.fleet && fleet_targets.empty()) {
    return absl::FailedPreconditionError(
        "this daemon has no fleet set to warm: start it with --fleet-archs, or name the archs");
  }
  if (ask.archs.size() > kMaxArchs) {
    return absl::InvalidArgumentError(Cat("a warm-up names at most ", kMaxArchs, " archs; this one names ",
                                          ask.archs.size(), " (NVRTC ", resolver.toolchain().nvrtc_version, " knows ",
                                          resolver.toolchain().archs.size(), ")"));
  }
  for (const std::string& arch : ask.archs) {
    JITD_RETURN_IF_ERROR(manifest::ValidateArch(arch, resolver.toolchain()));
    AddOnce(plan.archs_, arch);  // sm_90 twice is one compile, not two items
  }
  if (ask.fleet) {
    for (const std::string& arch : fleet_targets) AddOnce(plan.archs_, arch);
  }
  const bool archs_named = !plan.archs_.empty();
  if (!archs_named) plan.archs_.push_back(resolver.default_arch());
  const size_t archs = plan.archs_.size();
  if (ask.all) {
    if (const uint64_t at_most = AllAtMost(resolver, archs); at_most > kMaxItems) {
      return absl::InvalidArgumentError(
          Cat("a warm-up warms at most ", kMaxItems, " instantiations (specs x archs); all of them for ", archs,
              " arch(s) would be up to ", at_most, ": name fewer archs, or give specs in several calls"));
    }
    for (const manifest::ServedTree& tree : resolver.trees()) {
      if (tree.lock == nullptr) continue;
      for (const manifest::LockEntry& e : tree.lock->entries) {
        if (archs_named && std::find(plan.archs_.begin(), plan.archs_.end(), e.arch) == plan.archs_.end()) continue;
        std::optional<std::map<std::string, std::string>> params = ParseCanonicalParams(e.params);
        if (!params.has_value()) continue;  // a lock is parsed strictly: never happens
        plan.locked_.push_back({Qualified(tree, e.kernel), *std::move(params), e.arch, {}});
      }
    }
    for (const manifest::TreeKernel& kernel : resolver.Kernels()) {
      if (kernel.tree->lock != nullptr) continue;
      for (auto& params : manifest::Manifest::Instantiations(*kernel.def)) {
        plan.instantiations_.push_back({kernel.name, std::move(params), "", {}});
      }
    }
    plan.size_ = plan.locked_.size() + plan.instantiations_.size() * archs;
    return plan;
  }
  // No specs is an empty plan: `jitd warm` of an empty warm list warms
  // nothing and succeeds, as it always did (the Warm RPC refuses an empty
  // request before it asks for a plan).
  if (ask.specs.size() > kMaxItems) {
    return absl::InvalidArgumentError(Cat("a warm-up warms at most ", kMaxItems, " instantiations; this one gives ",
                                          ask.specs.size(), " specs: split it into several calls"));
  }
  plan.specs_ = std::move(ask.specs);
  plan.first_item_.reserve(plan.specs_.size());
  for (const manifest::KernelRequest& spec : plan.specs_) {
    plan.first_item_.push_back(plan.size_);
    plan.size_ += spec.arch.empty() ? archs : 1;
  }
  if (plan.size_ > kMaxItems) {
    return absl::InvalidArgumentError(Cat("a warm-up warms at most ", kMaxItems,
                                          " instantiations (specs x archs); this one asks for ", plan.size_,
                                          ": split it into several calls, or name fewer archs"));
  }
  return plan;
}

manifest::KernelRequest WarmPlan::At(size_t i) const {
  const size_t archs = archs_.size();
  if (specs_.empty()) {
    if (i < locked_.size()) return locked_[i];
    i -= locked_.size();
    manifest::KernelRequest item = instantiations_[i / archs];
    item.arch = archs_[i % archs];
    return item;
  }
  // The spec whose items begin at or before i (the last such one).
  const size_t s =
      static_cast<size_t>(std::upper_bound(first_item_.begin(), first_item_.end(), i) - first_item_.begin()) - 1;
  manifest::KernelRequest item = specs_[s];
  if (item.arch.empty()) item.arch = archs_[i - first_item_[s]];
  return item;
}

}  // namespace jitd::serving
