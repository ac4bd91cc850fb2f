#include "rpc/compiler_rpc.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <optional>
#include <vector>

#include "jitd/base/kernel_params.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "manifest/manifest.h"
#include "rpc/grpc_status.h"
#include "serving/warm_plan.h"
#include "serving/warm_run.h"
#include "system/memory_trim.h"

namespace jitd::daemon {
namespace {

using text::Cat;
using Steady = std::chrono::steady_clock;

// Compiles one Warm call keeps in flight at most, whatever it asks for:
// more would only fill the worker queue (and push live callers into
// RESOURCE_EXHAUSTED) without compiling any sooner.
constexpr size_t kMaxWarmConcurrency = 64;
// How often a Warm call that waits for its items checks for its caller.
constexpr std::chrono::milliseconds kWarmPollInterval{50};

// The caller's gRPC deadline on the steady clock the service waits with;
// no deadline stays "never".
Steady::time_point SteadyDeadline(const grpc::ServerContext& context) {
  const auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return Steady::time_point::max();
  const auto left = deadline - std::chrono::system_clock::now();
  // Beyond a year is "never" too (and would overflow the steady clock).
  if (left > std::chrono::hours(24 * 365)) return Steady::time_point::max();
  return Steady::now() + std::chrono::duration_cast<Steady::duration>(left);
}

serving::CallContext CallContextOf(grpc::ServerContext& context, compiler::Priority priority, std::string peer = "") {
  serving::CallContext call;
  call.peer = std::move(peer);
  call.deadline = SteadyDeadline(context);
  call.cancelled = [&context] { return context.IsCancelled(); };
  call.priority = priority;
  return call;
}

absl::StatusOr<serving::Mode> ModeOf(v1::GetKernelRequest::Mode mode) {
  switch (mode) {
    case v1::GetKernelRequest::COMPILE:
      return serving::Mode::kCompile;
    case v1::GetKernelRequest::CACHED_ONLY:
      return serving::Mode::kCachedOnly;
    case v1::GetKernelRequest::PREFETCH:
      return serving::Mode::kPrefetch;
    default:
      break;
  }
  return absl::InvalidArgumentError(
      Cat("unknown mode ", static_cast<int>(mode), " (COMPILE = 0, CACHED_ONLY = 1, PREFETCH = 2)"));
}

void FillResponse(const serving::KernelAnswer& answer, bool by_path, v1::GetKernelResponse* response) {
  response->set_key(answer.key);
  response->set_arch(answer.arch);
  response->set_source(SourceOf(answer.origin));
  if (answer.entry == nullptr) return;  // PREFETCH that queued a compile
  const cache::Entry& entry = *answer.entry;
  // PATH only when there is a file to name: a cubin that could not be
  // stored (full disk) is served from memory, and so is one whose blob was
  // evicted since it entered the hot cache; their bytes must travel. (One
  // stat, about a microsecond; a file evicted after it is the client's
  // to re-ask for as bytes.)
  std::error_code error;
  if (by_path && !entry.blob_path.empty() && std::filesystem::exists(entry.blob_path, error)) {
    response->set_blob_path(std::filesystem::absolute(entry.blob_path).string());
  } else {
    response->set_cubin(entry.cubin);
  }
  // The response's copy, and a disk hit's read buffers, are freed after
  // this answer.
  if (entry.cubin.size() >= kLargeBufferBytes) NoteLargeBuffer();
  response->set_cubin_size(entry.cubin.size());
  for (const cache::Symbol& symbol : entry.meta.symbols) {
    v1::Symbol* out = response->add_symbols();
    out->set_name_expression(symbol.name_expression);
    out->set_lowered_name(symbol.lowered_name);
  }
  response->set_compile_ms(entry.meta.compile_ms);
  response->set_log(entry.meta.log);
  response->set_nvrtc_version(entry.meta.nvrtc_version);
}

// A Warm request as the engine's question (serving::WarmPlan says the rules).
serving::WarmAsk WarmAskOf(const v1::WarmRequest& request) {
  serving::WarmAsk ask;
  ask.all = request.all();
  ask.fleet = request.fleet();
  ask.archs.assign(request.archs().begin(), request.archs().end());
  if (!ask.all) {
    ask.specs.reserve(static_cast<size_t>(request.specs_size()));
    for (const v1::KernelSpec& spec : request.specs()) {
      ask.specs.push_back(ToKernelRequest(spec.kernel(), spec.params(), spec.arch(), spec.options()));
    }
  }
  return ask;
}

void FillSpec(const manifest::KernelRequest& item, v1::KernelSpec* spec) {
  spec->set_kernel(item.kernel);
  spec->mutable_params()->insert(item.params.begin(), item.params.end());
  spec->set_arch(item.arch);
  for (const std::string& option : item.options) spec->add_options(option);
}

}  // namespace

manifest::KernelRequest ToKernelRequest(const std::string& kernel,
                                        const google::protobuf::Map<std::string, std::string>& params,
                                        const std::string& arch,
                                        const google::protobuf::RepeatedPtrField<std::string>& options) {
  manifest::KernelRequest request;
  request.kernel = kernel;
  request.params.insert(params.begin(), params.end());
  request.arch = arch;
  request.options.assign(options.begin(), options.end());
  return request;
}

manifest::KernelRequest ToKernelRequest(const v1::GetKernelRequest& request) {
  manifest::KernelRequest out = ToKernelRequest(request.kernel(), request.params(), request.arch(), request.options());
  if (request.has_module()) {
    const v1::ModuleSpec& spec = request.module();
    auto module = std::make_shared<manifest::AdhocModule>();
    module->sources.assign(spec.sources().begin(), spec.sources().end());
    module->include_dirs.assign(spec.include_dirs().begin(), spec.include_dirs().end());
    for (const v1::ModuleExport& e : spec.exports()) module->exports.emplace_back(e.name(), e.expression());
    module->options.assign(spec.options().begin(), spec.options().end());
    module->tree_fingerprint = spec.tree_fingerprint();
    out.module = std::move(module);
  }
  return out;
}

v1::GetKernelResponse::Source SourceOf(serving::Origin origin) {
  switch (origin) {
    case serving::Origin::kMemory:
      return v1::GetKernelResponse::MEMORY;
    case serving::Origin::kDisk:
      return v1::GetKernelResponse::DISK;
    case serving::Origin::kRemote:
      return v1::GetKernelResponse::REMOTE;
    case serving::Origin::kCompiled:
      return v1::GetKernelResponse::COMPILED;
    case serving::Origin::kNone:
      return v1::GetKernelResponse::NONE;
    case serving::Origin::kBundle:
      return v1::GetKernelResponse::BUNDLE;
  }
  return v1::GetKernelResponse::SOURCE_UNSPECIFIED;
}

CompilerRpc::CompilerRpc(serving::KernelService& service, InFlightCalls& calls, Options options)
    : service_(service), calls_(calls), options_(options), fatbins_(service) {}

grpc::Status CompilerRpc::GetKernel(grpc::ServerContext* context, const v1::GetKernelRequest* request,
                                    v1::GetKernelResponse* response) {
  const auto started = Steady::now();
  serving::Origin origin = serving::Origin::kNone;
  grpc::Status status = GetKernelCounted(context, request, response, &origin);
  if (options_.metrics != nullptr) {
    options_.metrics->ObserveRequest(static_cast<absl::StatusCode>(status.error_code()), origin,
                                     Steady::now() - started);
  }
  return status;
}

grpc::Status CompilerRpc::GetKernelCounted(grpc::ServerContext* context, const v1::GetKernelRequest* request,
                                           v1::GetKernelResponse* response, serving::Origin* origin) {
  const InFlightCalls::Scope in_flight(calls_);
  serving::Admission::Ticket slot;
  if (absl::Status admitted = service_.admission().AdmitCall(PeerOf(*context), &slot); !admitted.ok()) {
    return ToGrpcStatus(admitted);
  }
  const auto started = Steady::now();
  absl::StatusOr<serving::Mode> mode = ModeOf(request->mode());
  if (!mode.ok()) return ToGrpcStatus(mode.status());
  if (request->delivery() != v1::GetKernelRequest::BYTES && request->delivery() != v1::GetKernelRequest::PATH) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        Cat("unknown delivery ", static_cast<int>(request->delivery()), " (BYTES = 0, PATH = 1)")));
  }
  if (request->archs_size() > 0 || request->fleet()) {
    return GetFatbin(*request, *mode, CallContextOf(*context, compiler::Priority::kLive, PeerOf(*context)), response,
                     origin);
  }
  const manifest::KernelRequest kernel_request = ToKernelRequest(*request);
  absl::StatusOr<serving::KernelAnswer> answer =
      service_.Get(kernel_request, *mode, CallContextOf(*context, compiler::Priority::kLive, PeerOf(*context)));
  if (!answer.ok()) return ToGrpcStatus(answer.status());
  FillResponse(*answer, request->delivery() == v1::GetKernelRequest::PATH, response);
  *origin = answer->origin;
  const auto served_us = std::chrono::duration_cast<std::chrono::microseconds>(Steady::now() - started).count();
  response->set_served_us(static_cast<uint64_t>(served_us));
  if (options_.log_hits && (answer->origin == serving::Origin::kMemory || answer->origin == serving::Origin::kDisk ||
                            answer->origin == serving::Origin::kBundle)) {
    spdlog::info("hit {} {} {} key={} from {} in {}us", answer->kernel, answer->params, answer->arch,
                 answer->key.substr(0, 12), serving::OriginName(answer->origin), served_us);
  }
  return grpc::Status::OK;
}

v1::LocalAnswer CompilerRpc::AnswerLocal(const v1::GetKernelRequest& request, const std::string& peer) {
  const auto started = Steady::now();
  const InFlightCalls::Scope in_flight(calls_);
  v1::LocalAnswer answer;
  absl::Status status;
  serving::Origin origin = serving::Origin::kNone;
  if (request.mode() != v1::GetKernelRequest::CACHED_ONLY) {
    status = absl::InvalidArgumentError(
        "the local path answers CACHED_ONLY requests only; ask for a compile over gRPC (jitd.v1.Compiler/GetKernel)");
  } else if (request.archs_size() > 0 || request.fleet()) {
    status = absl::NotFoundError("the local path answers one arch at a time; ask for a fatbin over gRPC");
  } else if (request.delivery() != v1::GetKernelRequest::BYTES && request.delivery() != v1::GetKernelRequest::PATH) {
    status = absl::InvalidArgumentError(
        Cat("unknown delivery ", static_cast<int>(request.delivery()), " (BYTES = 0, PATH = 1)"));
  } else if (std::optional<serving::KernelAnswer> hit = service_.Find(ToKernelRequest(request))) {
    v1::GetKernelResponse* response = answer.mutable_response();
    // A hit is read once: a disk hit was just read and verified here, so it
    // travels as bytes even when PATH was asked, and the client does not
    // read and verify the same file again. A memory hit was read by nobody
    // now: PATH names its file, which the client reads and verifies once.
    FillResponse(*hit, request.delivery() == v1::GetKernelRequest::PATH && hit->origin != serving::Origin::kDisk,
                 response);
    origin = hit->origin;
    const auto served_us = std::chrono::duration_cast<std::chrono::microseconds>(Steady::now() - started).count();
    response->set_served_us(static_cast<uint64_t>(served_us));
    if (options_.log_hits) {
      spdlog::info("hit {} {} {} key={} from {} in {}us (local path, {})", hit->kernel, hit->params, hit->arch,
                   hit->key.substr(0, 12), serving::OriginName(hit->origin), served_us, peer);
    }
  } else {
    // Not in memory or on disk, or a request the resolver rejects: either
    // way gRPC's GetKernel, which the client asks next, has the answer.
    status = absl::NotFoundError("not in this daemon's memory, disk cache or bundles; ask over gRPC");
  }
  answer.set_code(static_cast<int32_t>(status.code()));
  answer.set_message(std::string(status.message()));
  if (options_.metrics != nullptr) options_.metrics->ObserveLocal(status.code(), origin, Steady::now() - started);
  return answer;
}

std::string CompilerRpc::PeerOf(const grpc::ServerContext& context) const {
  return options_.peer_of ? options_.peer_of(context.peer()) : context.peer();
}

grpc::Status CompilerRpc::Warm(grpc::ServerContext* context, const v1::WarmRequest* request,
                               grpc::ServerWriter<v1::WarmProgress>* writer) {
  const InFlightCalls::Scope in_flight(calls_);
  serving::Admission::Ticket slot;
  if (absl::Status admitted = service_.admission().AdmitCall(PeerOf(*context), &slot); !admitted.ok()) {
    return ToGrpcStatus(admitted);
  }
  const auto started = Steady::now();
  const std::shared_ptr<const manifest::Resolver> resolver = service_.resolver();
  if (!request->all() && request->specs().empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        "nothing to warm: set `all` or give `specs` (jitctl warm --all or --manifest FILE)"));
  }
  // A request is at most 1 MiB (server_listen.cpp): converting it is bounded.
  absl::StatusOr<serving::WarmPlan> plan =
      serving::WarmPlan::Make(WarmAskOf(*request), *resolver, service_.fleet_targets());
  if (!plan.ok()) return ToGrpcStatus(plan.status());
  const size_t total = plan->size();
  const size_t asked = request->concurrency() > 0 ? request->concurrency() : options_.workers;
  const size_t concurrency = std::clamp<size_t>(asked, 1, std::max<size_t>(1, std::min(kMaxWarmConcurrency, total)));
  spdlog::info("warm-up: {} instantiations, {} at a time (caller {})", total, concurrency, PeerOf(*context));

  // This thread (gRPC's, for the call) keeps `concurrency` items submitted
  // and writes their progress as they finish: no thread per item or call.
  serving::WarmRunOptions run;
  run.concurrency = concurrency;
  // Its compiles count against its caller's share, as GetKernel's do: a
  // flood of Warm calls from one user holds at most that user's share of
  // the queue, and waits for it (RunWarm) instead of taking the rest.
  run.call = CallContextOf(*context, compiler::Priority::kWarm, PeerOf(*context));
  run.call.cancelled = [context] { return context->IsCancelled(); };
  run.poll_interval = kWarmPollInterval;
  const serving::WarmCounts counts = serving::RunWarm(
      service_, total, [&](size_t i) { return plan->At(i); }, run,
      [&](size_t i, const absl::StatusOr<serving::KernelAnswer>& answer, serving::WarmOutcome outcome,
          const serving::WarmCounts& so_far) {
        const manifest::KernelRequest item = plan->At(i);
        v1::WarmProgress progress;
        FillSpec(item, progress.mutable_spec());
        if (answer.ok()) {
          progress.set_key(answer->key);
          const bool fresh = outcome == serving::WarmOutcome::kCompiled;
          progress.set_outcome(fresh ? v1::WarmProgress::COMPILED : v1::WarmProgress::CACHED);
          if (fresh) progress.set_compile_ms(answer->entry->meta.compile_ms);
        } else {
          if (auto resolved = service_.Resolve(item); resolved.ok()) progress.set_key(resolved->key);
          progress.set_outcome(v1::WarmProgress::FAILED);
          progress.set_error(Cat(absl::StatusCodeToString(answer.status().code()), ": ", answer.status().message()));
        }
        progress.set_done(so_far.done);
        progress.set_total(static_cast<uint32_t>(total));
        progress.set_compiled(so_far.compiled);
        progress.set_cached(so_far.cached);
        progress.set_failed(so_far.failed);
        progress.set_elapsed_ms(static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - started).count()));
        return writer->Write(progress);
      });
  const uint32_t done = counts.done, compiled = counts.compiled, cached = counts.cached, failed = counts.failed;

  const double seconds = std::chrono::duration<double>(Steady::now() - started).count();
  if (done < total) {
    spdlog::info("warm-up stopped after {} of {} instantiations ({:.1f} s): the caller went away", done, total,
                 seconds);
    return grpc::Status(grpc::StatusCode::CANCELLED,
                        Cat("warm-up cancelled after ", done, " of ", total, " instantiations"));
  }
  spdlog::info("warm-up: {} instantiations in {:.1f} s: {} compiled, {} already cached, {} failed", total, seconds,
               compiled, cached, failed);
  return grpc::Status::OK;
}

}  // namespace jitd::daemon
