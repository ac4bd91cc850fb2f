#include "serving/fatbin_assembly.h"

#include <algorithm>
#include <condition_variable>
#include <optional>

#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "jitd/fatbin.h"
#include "jitd/keys/field_digest.h"

namespace jitd::serving {
namespace {

using text::Cat;
using Steady = std::chrono::steady_clock;
using Answers = std::vector<absl::StatusOr<KernelAnswer>>;

// How often a wait on the parts' compiles looks at the caller.
constexpr std::chrono::milliseconds kPartPoll{50};

// The most expensive place a part came from: a fatbin is as cached as its
// least cached part.
Origin Weakest(const Answers& parts) {
  constexpr Origin kByCost[] = {Origin::kNone,   Origin::kCompiled, Origin::kRemote,
                                Origin::kBundle, Origin::kDisk,     Origin::kMemory};
  for (Origin origin : kByCost) {
    if (std::any_of(parts.begin(), parts.end(), [&](const auto& part) { return part->origin == origin; })) {
      return origin;
    }
  }
  return Origin::kMemory;
}

absl::StatusOr<std::string> BuildFatbin(const std::vector<std::string>& targets, const Answers& parts) {
  std::vector<fatbin::Image> images;
  for (size_t i = 0; i < parts.size(); ++i) {
    JITD_ASSIGN_OR_RETURN(manifest::ArchName name, manifest::ParseArchName(targets[i]));
    fatbin::Image image;
    image.kind = name.virtual_arch ? fatbin::ImageKind::kPtx : fatbin::ImageKind::kCubin;
    image.arch = name.number;
    if (name.suffix == 'a') image.variant = fatbin::ArchVariant::kArchSpecific;
    if (name.suffix == 'f') image.variant = fatbin::ArchVariant::kFamilySpecific;
    image.bytes = parts[i]->entry->cubin;
    // PTX is kept NUL-terminated for cuModuleLoadData; the fatbin's entry
    // carries its own size.
    if (name.virtual_arch && !image.bytes.empty() && image.bytes.back() == '\0') image.bytes.pop_back();
    images.push_back(std::move(image));
  }
  return fatbin::WriteFatbin(images);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> FatbinAssembly::TargetsOf(const FatbinTargets& asked) const {
  if (!asked.arch.empty()) {
    return absl::InvalidArgumentError(
        Cat("name one arch in `arch` or several in `archs`/`fleet`, not both (arch '", asked.arch, "')"));
  }
  if (asked.fleet) {
    if (!asked.archs.empty()) return absl::InvalidArgumentError("`fleet` asks for the fleet set: leave `archs` out");
    if (service_.fleet_targets().empty()) {
      return absl::FailedPreconditionError(
          "this daemon has no fleet set: start it with --fleet-archs (fleet_archs in its config file), or name "
          "the archs in `archs`");
    }
    return service_.fleet_targets();
  }
  if (asked.archs.size() > static_cast<size_t>(kMaxArchs)) {
    return absl::InvalidArgumentError(Cat(asked.archs.size(), " archs in one request; at most ", kMaxArchs));
  }
  std::vector<std::string> targets;
  for (const std::string& arch : asked.archs) {
    if (std::find(targets.begin(), targets.end(), arch) != targets.end()) {
      return absl::InvalidArgumentError(Cat("`archs` names ", arch, " twice"));
    }
    targets.push_back(arch);
  }
  if (targets.empty()) return absl::InvalidArgumentError("`archs` is empty");
  return targets;
}

std::shared_ptr<const std::string> FatbinAssembly::Built::Find(const std::string& digest) {
  std::lock_guard lock(mu);
  auto it = by_digest.find(digest);
  return it == by_digest.end() ? nullptr : it->second;
}

void FatbinAssembly::Built::Add(const std::string& digest, std::shared_ptr<const std::string> fatbin) {
  if (fatbin->size() > kMaxBytes / 4) return;  // a few large ones would only push out everything else
  std::lock_guard lock(mu);
  if (!by_digest.emplace(digest, fatbin).second) return;
  order.push_back(digest);
  bytes += fatbin->size();
  while (bytes > kMaxBytes) {
    auto oldest = by_digest.find(order.front());
    bytes -= oldest->second->size();
    by_digest.erase(oldest);
    order.pop_front();
  }
}

FatbinAssembly::Answers FatbinAssembly::GetParts(const manifest::KernelRequest& base,
                                                 const std::vector<std::string>& targets, Mode mode,
                                                 const CallContext& call) {
  Answers answers;
  if (mode != Mode::kCompile) {
    // Hits or queued compiles: none of them waits.
    for (const std::string& arch : targets) {
      manifest::KernelRequest part = base;
      part.arch = arch;
      answers.push_back(service_.Get(part, mode, call));
    }
    return answers;
  }
  // Compiles run side by side on the workers: each part is submitted, then
  // the caller waits for all of them (or gives up on those still running).
  struct Waiting {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::optional<absl::StatusOr<KernelAnswer>>> done;
    size_t left = 0;
  };
  auto waiting = std::make_shared<Waiting>();
  waiting->done.resize(targets.size());
  // Parts in memory, on disk or in a bundle are taken as they are (counted
  // and recorded as any hit): a fatbin of cached parts costs lookups, not a
  // flight and a wait per part. Only the missing ones are submitted.
  for (size_t i = 0; i < targets.size(); ++i) {
    manifest::KernelRequest part = base;
    part.arch = targets[i];
    if (std::optional<KernelAnswer> hit = service_.Find(part)) waiting->done[i] = *std::move(hit);
  }
  waiting->left = static_cast<size_t>(
      std::count_if(waiting->done.begin(), waiting->done.end(), [](const auto& done) { return !done.has_value(); }));
  std::vector<std::shared_ptr<Flight>> flights(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    if (waiting->done[i].has_value()) continue;
    manifest::KernelRequest part = base;
    part.arch = targets[i];
    flights[i] = service_.Submit(part, call, [waiting, i](absl::StatusOr<KernelAnswer> answer) {
      std::lock_guard lock(waiting->mu);
      waiting->done[i] = std::move(answer);
      if (--waiting->left == 0) waiting->cv.notify_all();
    });
  }
  std::unique_lock lock(waiting->mu);
  bool withdrawn = false;
  while (waiting->left > 0) {
    waiting->cv.wait_until(lock, std::min(call.deadline, Steady::now() + kPartPoll));
    if (waiting->left == 0 || withdrawn) continue;
    if (Steady::now() >= call.deadline || (call.cancelled && call.cancelled())) {
      // Those still running are given up on (their `done` still runs).
      withdrawn = true;
      std::vector<Flight*> running;
      for (size_t i = 0; i < flights.size(); ++i) {
        if (flights[i] != nullptr && !waiting->done[i].has_value()) running.push_back(flights[i].get());
      }
      lock.unlock();
      for (Flight* flight : running) service_.Withdraw(*flight);
      lock.lock();
    }
  }
  for (auto& answer : waiting->done) answers.push_back(*std::move(answer));
  return answers;
}

absl::StatusOr<FatbinAnswer> FatbinAssembly::Get(const manifest::KernelRequest& base, const FatbinTargets& asked,
                                                 Mode mode, const CallContext& call) {
  if (auto found = service_.resolver()->FindKernel(base.kernel); found.ok() && found->def->is_module()) {
    // A shared object holds its host code once; its device code is for
    // the one arch it was built for.
    return absl::InvalidArgumentError(Cat("kernel ", found->name,
                                          " is a module (a host shared object, built for one arch): ask for one "
                                          "`arch`, not `archs` or `fleet`"));
  }
  FatbinAnswer answer;
  JITD_ASSIGN_OR_RETURN(answer.targets, TargetsOf(asked));
  const std::vector<std::string>& targets = answer.targets;
  const Answers parts = GetParts(base, targets, mode, call);
  keys::FieldDigest digest;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!parts[i].ok()) {
      const absl::Status& s = parts[i].status();
      return absl::Status(s.code(), Cat(targets[i], ": ", s.message()));
    }
    digest.Field("part", parts[i]->key);
  }
  answer.key = digest.Hex();
  answer.origin = Weakest(parts);
  if (answer.origin == Origin::kNone) return answer;  // PREFETCH queued what was missing
  answer.fatbin = built_.Find(answer.key);
  if (answer.fatbin == nullptr) {
    absl::StatusOr<std::string> built = BuildFatbin(targets, parts);
    if (!built.ok()) return absl::InternalError(Cat("cannot build the fatbin: ", built.status().message()));
    answer.fatbin = std::make_shared<const std::string>(*std::move(built));
    built_.Add(answer.key, answer.fatbin);
  }
  const cache::EntryMeta& first = parts.front()->entry->meta;
  answer.symbols = first.symbols;
  for (size_t i = 0; i < parts.size(); ++i) {
    const cache::EntryMeta& meta = parts[i]->entry->meta;
    answer.compile_ms += meta.compile_ms;
    if (!meta.log.empty()) {
      text::Append(answer.log, "[", targets[i], "]\n", meta.log, meta.log.back() == '\n' ? "" : "\n");
    }
  }
  answer.nvrtc_version = first.nvrtc_version;
  return answer;
}

}  // namespace jitd::serving
