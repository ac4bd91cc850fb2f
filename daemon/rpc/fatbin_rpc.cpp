// GetKernel for several architectures at once (`archs`, `fleet`): each
// architecture is an ordinary instantiation, answered by the tiers or
// compiled and cached on its own, and the answer is one fatbin of them
// (jitd/fatbin.h) that the driver loads like a cubin.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "jitd/fatbin.h"
#include "jitd/keys/field_digest.h"
#include "rpc/compiler_rpc.h"
#include "rpc/grpc_status.h"

namespace jitd::daemon {
namespace {

using text::Cat;
using Steady = std::chrono::steady_clock;
using Answers = std::vector<absl::StatusOr<serving::KernelAnswer>>;

// More would only make one request cost more: every sm_ arch NVRTC knows
// and its PTX fit.
constexpr int kMaxFatbinArchs = 24;
// How often a wait on the parts' compiles looks at the caller.
constexpr std::chrono::milliseconds kPartPoll{50};

// The most expensive place a part came from: a fatbin is as cached as its
// least cached part.
serving::Origin Weakest(const Answers& parts) {
  constexpr serving::Origin kByCost[] = {serving::Origin::kNone,   serving::Origin::kCompiled,
                                         serving::Origin::kRemote, serving::Origin::kBundle,
                                         serving::Origin::kDisk,   serving::Origin::kMemory};
  for (serving::Origin origin : kByCost) {
    if (std::any_of(parts.begin(), parts.end(), [&](const auto& part) { return part->origin == origin; })) {
      return origin;
    }
  }
  return serving::Origin::kMemory;
}

absl::StatusOr<std::vector<std::string>> TargetsOf(const v1::GetKernelRequest& request,
                                                   const std::vector<std::string>& fleet_targets) {
  if (!request.arch().empty()) {
    return absl::InvalidArgumentError(
        Cat("name one arch in `arch` or several in `archs`/`fleet`, not both (arch '", request.arch(), "')"));
  }
  if (request.fleet()) {
    if (request.archs_size() > 0)
      return absl::InvalidArgumentError("`fleet` asks for the fleet set: leave `archs` out");
    if (fleet_targets.empty()) {
      return absl::FailedPreconditionError(
          "this daemon has no fleet set: start it with --fleet-archs (fleet_archs in its config file), or name "
          "the archs in `archs`");
    }
    return fleet_targets;
  }
  if (request.archs_size() > kMaxFatbinArchs) {
    return absl::InvalidArgumentError(Cat(request.archs_size(), " archs in one request; at most ", kMaxFatbinArchs));
  }
  std::vector<std::string> targets;
  for (const std::string& arch : request.archs()) {
    if (std::find(targets.begin(), targets.end(), arch) != targets.end()) {
      return absl::InvalidArgumentError(Cat("`archs` names ", arch, " twice"));
    }
    targets.push_back(arch);
  }
  return targets;
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

std::shared_ptr<const std::string> CompilerRpc::BuiltFatbins::Find(const std::string& digest) {
  std::lock_guard lock(mu);
  auto it = by_digest.find(digest);
  return it == by_digest.end() ? nullptr : it->second;
}

void CompilerRpc::BuiltFatbins::Add(const std::string& digest, std::shared_ptr<const std::string> fatbin) {
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

Answers CompilerRpc::GetParts(const manifest::KernelRequest& base, const std::vector<std::string>& targets,
                              serving::Mode mode, const serving::CallContext& call) {
  Answers answers;
  if (mode != serving::Mode::kCompile) {
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
    std::vector<std::optional<absl::StatusOr<serving::KernelAnswer>>> done;
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
    if (std::optional<serving::KernelAnswer> hit = service_.Find(part)) waiting->done[i] = *std::move(hit);
  }
  waiting->left = static_cast<size_t>(
      std::count_if(waiting->done.begin(), waiting->done.end(), [](const auto& done) { return !done.has_value(); }));
  std::vector<std::shared_ptr<serving::Flight>> flights(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    if (waiting->done[i].has_value()) continue;
    manifest::KernelRequest part = base;
    part.arch = targets[i];
    flights[i] = service_.Submit(part, call, [waiting, i](absl::StatusOr<serving::KernelAnswer> answer) {
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
      std::vector<serving::Flight*> running;
      for (size_t i = 0; i < flights.size(); ++i) {
        if (flights[i] != nullptr && !waiting->done[i].has_value()) running.push_back(flights[i].get());
      }
      lock.unlock();
      for (serving::Flight* flight : running) service_.Withdraw(*flight);
      lock.lock();
    }
  }
  for (auto& answer : waiting->done) answers.push_back(*std::move(answer));
  return answers;
}

grpc::Status CompilerRpc::GetFatbin(const v1::GetKernelRequest& request, serving::Mode mode,
                                    const serving::CallContext& call, v1::GetKernelResponse* response,
                                    serving::Origin* origin) {
  absl::StatusOr<std::vector<std::string>> targets = TargetsOf(request, service_.fleet_targets());
  if (!targets.ok()) return ToGrpcStatus(targets.status());
  if (targets->empty()) return ToGrpcStatus(absl::InvalidArgumentError("`archs` is empty"));
  const manifest::KernelRequest base = ToKernelRequest(request.kernel(), request.params(), "", request.options());
  const Answers parts = GetParts(base, *targets, mode, call);
  keys::FieldDigest digest;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!parts[i].ok()) {
      const absl::Status& s = parts[i].status();
      return ToGrpcStatus(absl::Status(s.code(), Cat((*targets)[i], ": ", s.message())));
    }
    digest.Field("part", parts[i]->key);
  }
  response->set_key(digest.Hex());
  response->set_arch(text::Join(*targets, "+"));
  for (const std::string& target : *targets) response->add_fatbin_archs(target);
  *origin = Weakest(parts);
  response->set_source(SourceOf(*origin));
  if (*origin == serving::Origin::kNone) return grpc::Status::OK;  // PREFETCH queued what was missing
  std::shared_ptr<const std::string> fatbin = built_fatbins_.Find(response->key());
  if (fatbin == nullptr) {
    absl::StatusOr<std::string> built = BuildFatbin(*targets, parts);
    if (!built.ok())
      return ToGrpcStatus(absl::InternalError(Cat("cannot build the fatbin: ", built.status().message())));
    fatbin = std::make_shared<const std::string>(*std::move(built));
    built_fatbins_.Add(response->key(), fatbin);
  }
  const cache::EntryMeta& first = parts.front()->entry->meta;
  for (const cache::Symbol& symbol : first.symbols) {
    v1::Symbol* out = response->add_symbols();
    out->set_name_expression(symbol.name_expression);
    out->set_lowered_name(symbol.lowered_name);
  }
  double compile_ms = 0;
  std::string log;
  for (size_t i = 0; i < parts.size(); ++i) {
    const cache::EntryMeta& meta = parts[i]->entry->meta;
    compile_ms += meta.compile_ms;
    if (!meta.log.empty()) text::Append(log, "[", (*targets)[i], "]\n", meta.log, meta.log.back() == '\n' ? "" : "\n");
  }
  response->set_compile_ms(compile_ms);
  response->set_log(log);
  response->set_nvrtc_version(first.nvrtc_version);
  response->set_cubin_size(fatbin->size());
  response->set_cubin(*fatbin);
  return grpc::Status::OK;
}

}  // namespace jitd::daemon
