#include "app/server.h"

#include <grpc/grpc.h>
#include <grpcpp/server.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "app/server_impl.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "rpc/serving_stats.h"
#include "system/fd_limit.h"

namespace jitd::daemon {
namespace {

using text::Cat;

// At shutdown, how long answers whose handlers have returned get to reach
// their sockets before the remaining connections are closed: a 256 MiB
// answer crosses a Unix socket in about 0.2 s here (1.1-1.9 GB/s).
constexpr std::chrono::milliseconds kSendGrace{500};

}  // namespace

Server::Impl::~Impl() {
  StopToolkitListener();
  probe.reset();
  if (acceptor != nullptr) acceptor->Stop();
  if (local != nullptr) local->Stop();
  if (grpc_server != nullptr && !shut_down) grpc_server->Shutdown();
}

void Server::Impl::SizeConnections() {
  const FileLimit limit = RaiseFileLimit();
  UnixAcceptor::Options options;
  options.max_connections = config.max_connections.value_or(AutoMaxConnections(limit.now));
  options.max_per_peer = config.max_connections_per_peer.value_or(std::max<uint64_t>(1, options.max_connections / 2));
  if (options.max_connections == 0 && !config.max_connections_per_peer) options.max_per_peer = 0;
  spdlog::info("connections: at most {} open, {} per user (file descriptor limit {}{})",
               options.max_connections == 0 ? std::string("unbounded") : std::to_string(options.max_connections),
               options.max_per_peer == 0 ? std::string("unbounded") : std::to_string(options.max_per_peer), limit.now,
               limit.now != limit.before ? Cat(", raised from ", limit.before) : std::string());
  acceptor = std::make_unique<UnixAcceptor>(options);
}

manifest::Toolchain Server::Impl::CurrentToolchain() const {
  std::lock_guard lock(toolchain_mu);
  return toolchain;
}

void Server::Impl::StopToolkitListener() {
  if (toolkit != nullptr && toolkit_listener != 0) toolkit->RemoveListener(toolkit_listener);
  toolkit_listener = 0;
}

absl::Status Server::Impl::AdoptLatestToolchain() {
  // The trees served when the update runs, not when the change was seen: a
  // reload in between is built on, never swapped back (with its locks).
  // The toolchain is the latest one (set before the update waits): a
  // reload that read an older one (toolkit or module toolchain) is rebuilt
  // here; one that read this one is left as it is.
  return service
      ->UpdateResolver([this](const std::shared_ptr<const manifest::Resolver>& current)
                           -> absl::StatusOr<std::shared_ptr<const manifest::Resolver>> {
        const manifest::Toolchain latest = CurrentToolchain();
        if (current->toolchain().identity == latest.identity && current->toolchain().modules == latest.modules) {
          return current;
        }
        JITD_ASSIGN_OR_RETURN(std::unique_ptr<manifest::Resolver> rebuilt, current->WithToolchain(latest));
        return std::shared_ptr<const manifest::Resolver>(std::move(rebuilt));
      })
      .status();
}

void Server::Impl::OnToolkitChanged(const compiler::ToolkitIdentity& now) {
  absl::StatusOr<manifest::Toolchain> changed = manifest::Toolchain::FromIdentity(now);
  if (!changed.ok()) {
    spdlog::error("toolkit changed, but its toolchain cannot be read: {}", changed.status().ToString());
    return;
  }
  // nvcc came with the toolkit: the module toolchain is detected again,
  // on the next module request.
  changed->modules = ModuleToolchainOf(config, cache->dir(), BundledModuleBuilders());
  {
    std::lock_guard lock(toolchain_mu);
    toolchain = *changed;
  }
  if (stack.pool != nullptr) stack.pool->RestartWorkers();
  if (service == nullptr) return;
  if (absl::Status adopted = AdoptLatestToolchain(); !adopted.ok()) {
    spdlog::error("toolkit changed, but the kernels do not resolve with it: {}; compiles are refused until SIGHUP",
                  adopted.ToString());
    return;
  }
  // New keys from here on: the hot set compiles again before it is asked for.
  RememberToolkit(now.fingerprint);
  if (rewarmer != nullptr) rewarmer->Trigger("toolkit changed");
}

absl::Status Server::Impl::CheckModuleBuild(const compiler::CompileJob& job) {
  const std::shared_ptr<const manifest::ModuleToolchainSource> source = CurrentToolchain().modules;
  if (source == nullptr) return absl::OkStatus();
  absl::StatusOr<std::string> now = source->FingerprintNow();
  if (!now.ok()) {
    return absl::UnavailableError(
        Cat("the module toolchain cannot be checked after the build: ", now.status().message()));
  }
  if (*now == job.module.toolchain_fingerprint) return absl::OkStatus();
  OnModuleToolchainChanged(*now);
  return absl::UnavailableError("the module toolchain (nvcc, the host compiler or tvm-ffi) changed on disk");
}

void Server::Impl::CheckModuleToolchain() {
  const std::shared_ptr<const manifest::ModuleToolchainSource> source = CurrentToolchain().modules;
  const std::shared_ptr<const manifest::ModuleToolchain> built_with =
      source != nullptr ? source->DetectedBuilder() : nullptr;
  if (built_with == nullptr) return;  // not detected yet: the first module request detects what is there
  absl::StatusOr<std::string> now = source->FingerprintNow();
  if (!now.ok()) {
    spdlog::warn("SIGHUP: the module toolchain cannot be checked: {}", now.status().ToString());
    return;
  }
  if (*now != built_with->fingerprint) OnModuleToolchainChanged(*now);
}

void Server::Impl::OnModuleToolchainChanged(const std::string& now) {
  {
    std::lock_guard lock(toolchain_mu);
    absl::StatusOr<std::shared_ptr<const manifest::ModuleToolchain>> current = toolchain.modules->Get();
    if (current.ok() && (*current)->fingerprint == now) return;  // already taken in (a job resolved before)
    toolchain.modules = ModuleToolchainOf(config, cache->dir(), BundledModuleBuilders());
  }
  // Logged once the resolver has it, so that the line is true when read:
  // a request after it resolves to the new keys.
  if (service != nullptr) {
    if (absl::Status adopted = AdoptLatestToolchain(); !adopted.ok()) {
      spdlog::error("the module toolchain changed, but the kernels do not resolve with it: {}", adopted.ToString());
      return;
    }
  }
  spdlog::warn(
      "the module toolchain changed on disk (nvcc, the host compiler or tvm-ffi): module kernels resolve to "
      "new keys from now on, and the hot set is rewarmed");
  if (rewarmer != nullptr) rewarmer->Trigger("module toolchain changed");
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const DaemonConfig& config) {
  const auto started = std::chrono::steady_clock::now();
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  JITD_RETURN_IF_ERROR(impl->CheckConfig());
  JITD_RETURN_IF_ERROR(impl->LoadAdminToken());
  impl->SizeConnections();
  JITD_RETURN_IF_ERROR(impl->OpenCache());
  JITD_RETURN_IF_ERROR(impl->StartServing());
  ServingStatsSources sources{impl->service.get(), impl->stack.pool.get(), config.max_queue,
                              impl->trees.get(),   impl->remote.get(),     impl->rewarmer.get()};
  impl->admin = std::make_unique<CacheAdminRpc>(
      *impl->cache, impl->auth, impl->calls, started,
      [sources](v1::StatsResponse* response) { AddServingStats(sources, response); },
      [service = impl->service.get()](const std::vector<std::string>& keys) { service->Forget(keys); });
  JITD_RETURN_IF_ERROR(impl->Listen());
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

bool Server::listener_deaf() const { return impl_->listener_deaf.load(); }
Server::~Server() = default;

const std::vector<std::string>& Server::addresses() const { return impl_->addresses; }

std::string Server::DescribeKernels() const {
  if (impl_->service == nullptr) return "shut down";
  const std::shared_ptr<const manifest::Resolver> resolver = impl_->service->resolver();
  return serving::KernelTrees::Describe(*resolver);
}

std::string Server::RefusedTrees() const { return impl_->trees != nullptr ? impl_->trees->RefusedSummary() : ""; }

absl::Status Server::ReloadKernels() {
  // A toolkit change is noticed here too, not only by the next compile: the
  // listener swaps in the new toolchain before the kernels are re-read.
  if (absl::StatusOr<compiler::ToolkitWatch::Observation> checked = impl_->toolkit->Check(); !checked.ok()) {
    spdlog::warn("SIGHUP: the toolkit cannot be checked: {}", checked.status().ToString());
  }
  // So is a change of nvcc, the host compiler or tvm-ffi, which the toolkit
  // watch does not cover: without it, cached modules of the old toolchain
  // would be served until the next module build noticed.
  impl_->CheckModuleToolchain();
  // Read, built and swapped as one update (KernelService::UpdateResolver):
  // a toolkit change seen meanwhile either set its toolchain before this
  // reads it, or rebuilds what this swaps in once it is done.
  std::shared_ptr<const manifest::Resolver> old;
  std::vector<std::string> refused;
  JITD_ASSIGN_OR_RETURN(
      const std::shared_ptr<const manifest::Resolver> reloaded,
      impl_->service->UpdateResolver([&](const std::shared_ptr<const manifest::Resolver>& current)
                                         -> absl::StatusOr<std::shared_ptr<const manifest::Resolver>> {
        old = current;
        spdlog::info("SIGHUP: re-reading the kernels: {}", serving::KernelTrees::Describe(*current));
        JITD_ASSIGN_OR_RETURN(serving::KernelTrees::Loaded loaded,
                              impl_->trees->Load(impl_->CurrentToolchain(), current.get()));
        refused = std::move(loaded.refused);
        return std::move(loaded.resolver);
      }));
  if (!refused.empty()) {
    return absl::FailedPreconditionError(Cat(refused.size(), " kernel tree(s) refused: ", text::Join(refused, "; ")));
  }
  spdlog::info("reloaded kernels: {} (was {})", serving::KernelTrees::Summary(*reloaded),
               serving::KernelTrees::Fingerprints(*old));
  return absl::OkStatus();
}

absl::Status Server::Shutdown(std::chrono::milliseconds drain) {
  if (impl_->shut_down) return absl::OkStatus();
  impl_->shut_down = true;
  // No new connection from here on; those open are gRPC's to end.
  impl_->probe.reset();
  impl_->acceptor->Stop();
  // The local path answers lookups only: the one being answered finishes,
  // and its clients ask gRPC (and see it shutting down) from here on.
  if (impl_->local != nullptr) impl_->local->Stop();
  // NOT_SERVING first, so load balancers and readiness probes stop sending
  // work while the calls in flight finish.
  impl_->health->Shutdown();
  // gRPC's Shutdown(deadline) stops taking calls, lets those in flight
  // finish until the deadline (then cancels them), but also waits, up to
  // that deadline, for every client to hang up after its GOAWAY, which an
  // idle client channel never does. So the core shutdown starts first (no
  // new call from here on), the daemon waits for its own handlers to
  // return, and then gives the C++ shutdown only kSendGrace (for the last
  // answers to reach their sockets) before it closes what is left.
  const auto deadline = std::chrono::steady_clock::now() + drain;
  grpc_server* core = impl_->grpc_server->c_server();
  grpc_completion_queue* notice = grpc_completion_queue_create_for_next(nullptr);
  static int shutdown_tag = 0;
  grpc_server_shutdown_and_notify(core, notice, &shutdown_tag);
  const bool idle = impl_->calls.WaitIdle(deadline);
  const auto grace =
      idle ? std::min<std::chrono::steady_clock::duration>(deadline - std::chrono::steady_clock::now(), kSendGrace)
           : std::chrono::steady_clock::duration::zero();
  impl_->grpc_server->Shutdown(std::chrono::system_clock::now() +
                               std::chrono::duration_cast<std::chrono::system_clock::duration>(grace));
  impl_->grpc_server->Wait();
  grpc_completion_queue_shutdown(notice);
  while (grpc_completion_queue_next(notice, gpr_inf_future(GPR_CLOCK_REALTIME), nullptr).type != GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(notice);
  // No call runs now. Compiles that nobody waits for (PREFETCH) finish and
  // are stored before the cache flushes; destroying the request path waits
  // for them.
  if (const uint64_t left = impl_->service->stats().in_flight; left > 0) {
    spdlog::info("waiting for {} background compile(s) to finish and be stored", left);
  }
  impl_->grpc_server.reset();
  // The metrics endpoint reads the service, the pool and the cache: it
  // stops before any of them goes.
  impl_->metrics_server.reset();
  impl_->StopToolkitListener();
  impl_->compiler.reset();
  impl_->admin.reset();
  impl_->service.reset();
  return impl_->cache->Flush();
}

}  // namespace jitd::daemon
