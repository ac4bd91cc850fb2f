// A kernel for several architectures at once (a request's `archs` or
// `fleet`): each architecture is an ordinary instantiation, answered by the
// tiers or compiled and cached on its own through KernelService, and the
// answer is one fatbin of them (jitd/fatbin.h) that the driver loads like a
// cubin. Protocol-free: rpc/ only converts the request and the answer.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "serving/kernel_service.h"

namespace jitd::serving {

// The archs a fatbin request names, as the request says them.
struct FatbinTargets {
  std::string arch;                // must be empty: one arch is not a fatbin
  std::vector<std::string> archs;  // the archs, each once
  bool fleet = false;              // the daemon's fleet set instead
};

struct FatbinAnswer {
  // The digest of the parts' content keys: the same parts, the same bytes.
  std::string key;
  std::vector<std::string> targets;  // in the fatbin's order
  // The most expensive place a part came from: a fatbin is as cached as its
  // least cached part. kNone when PREFETCH queued what was missing (then
  // there are no bytes).
  Origin origin = Origin::kNone;
  std::shared_ptr<const std::string> fatbin;
  std::vector<cache::Symbol> symbols;  // the first part's (every part has the same)
  double compile_ms = 0;               // summed over the parts
  std::string log;                     // each part's, under its arch
  std::string nvrtc_version;
};

class FatbinAssembly {
 public:
  // More would only make one request cost more: every sm_ arch NVRTC knows
  // and its PTX fit.
  static constexpr int kMaxArchs = 24;

  // `service` must outlive this.
  explicit FatbinAssembly(KernelService& service) : service_(service) {}

  // The fatbin of `base` (its arch ignored) for `targets`. A part that fails
  // fails the whole, its arch named. Parts in memory, on disk or in a
  // bundle are taken as they are; only the missing ones are compiled, side
  // by side, and a caller that goes (deadline, cancel) gives up on those
  // still running.
  absl::StatusOr<FatbinAnswer> Get(const manifest::KernelRequest& base, const FatbinTargets& targets, Mode mode,
                                   const CallContext& call);

 private:
  using Answers = std::vector<absl::StatusOr<KernelAnswer>>;
  absl::StatusOr<std::vector<std::string>> TargetsOf(const FatbinTargets& asked) const;
  // Every part, in the order of `targets`; compiles side by side.
  Answers GetParts(const manifest::KernelRequest& base, const std::vector<std::string>& targets, Mode mode,
                   const CallContext& call);

  KernelService& service_;

  // Fatbins built lately, by the digest of their parts' content keys: the
  // same parts always make the same bytes, so an entry never goes stale,
  // and a repeated fleet request copies one buffer instead of building the
  // container again. Bounded in bytes; the oldest goes first.
  struct Built {
    static constexpr size_t kMaxBytes = 32 << 20;
    std::mutex mu;
    std::unordered_map<std::string, std::shared_ptr<const std::string>> by_digest;  // guarded by mu
    std::deque<std::string> order;                                                  // guarded by mu
    size_t bytes = 0;                                                               // guarded by mu
    std::shared_ptr<const std::string> Find(const std::string& digest);
    void Add(const std::string& digest, std::shared_ptr<const std::string> fatbin);
  };
  Built built_;
};

}  // namespace jitd::serving
