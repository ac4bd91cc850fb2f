#include "rpc/server.h"

#include <grp.h>
#include <grpc/grpc.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/server_posix.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <set>

#include "jitd/base/admin_token.h"
#include "jitd/base/files.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "jitd/cache.h"
#include "metrics/http_server.h"
#include "process/cache_dir_lock.h"
#include "process/compile_stack.h"
#include "process/fd_limit.h"
#include "process/memory_trim.h"
#include "rpc/cache_admin_rpc.h"
#include "rpc/compiler_rpc.h"
#include "rpc/daemon_metrics.h"
#include "rpc/health_rpc.h"
#include "rpc/in_flight_calls.h"
#include "rpc/local_server.h"
#include "rpc/serving_stats.h"
#include "security/admin_auth.h"
#include "security/admin_token_files.h"
#include "security/listen_address.h"
#include "security/listener_probe.h"
#include "security/tcp_credentials.h"
#include "security/unix_acceptor.h"
#include "security/unix_socket_claim.h"
#include "serving/kernel_service.h"

namespace jitd::daemon {
namespace {

using text::Cat;
using text::Join;

// Requests are a kernel name, a few params and options: 1 MiB is far above
// any real one and keeps a hostile or broken client from making the daemon
// buffer large messages (gRPC's default would be 4 MiB).
constexpr int kMaxReceiveMessageBytes = 1 << 20;
// Answers carry a cubin; the largest real ones are a few MiB. 256 MiB is a
// sanity bound (a cubin that size wants Delivery PATH anyway).
constexpr int kMaxSendMessageBytes = 256 << 20;
// At shutdown, how long answers whose handlers have returned get to reach
// their sockets before the remaining connections are closed: a 256 MiB
// answer crosses a Unix socket in about 0.2 s here (1.1-1.9 GB/s).
constexpr std::chrono::milliseconds kSendGrace{500};

std::string ShortFingerprint(const manifest::Resolver& resolver) { return resolver.tree().fingerprint().substr(0, 12); }

size_t KernelCount(const manifest::Resolver& resolver) { return resolver.tree().manifest().kernels.size(); }

// What a remote lookup's reply holds besides the value: RESP framing and
// the failure marker (a status message of at most a few KiB).
constexpr uint64_t kRemoteReplyOverheadBytes = 64 << 10;

}  // namespace

// Members are destroyed in reverse order: the gRPC server first (no call
// runs after that), then the socket claims (the files go once nobody
// listens), then the services, the request path (which waits for compiles
// still running), the worker pool, and last the cache they all use.
class Server::Impl {
 public:
  DaemonConfig config;
  // The TCP addresses' credentials, made (and TCP without TLS refused)
  // by CheckConfig before anything else.
  std::shared_ptr<grpc::ServerCredentials> tcp_credentials;
  std::unique_ptr<CacheDirLock> dir_lock;  // before the cache: released after it closes
  std::unique_ptr<cache::Cache> cache;
  AdminAuth auth;
  // The CUDA headers and NVRTC libraries compiles run with, watched: the
  // pool checks every job against it, and a change it notices gives the
  // request path a resolver with the new toolchain (OnToolkitChanged).
  std::shared_ptr<compiler::ToolkitWatch> toolkit;
  std::uint64_t toolkit_listener = 0;
  // Changed by OnToolkitChanged (on whichever thread noticed the change).
  mutable std::mutex toolchain_mu;
  manifest::Toolchain toolchain;
  // The workers and their scratch directory. Its resolver is dropped once
  // the request path has it: the kernels served now (after any SIGHUP) are
  // always service->resolver().
  CompileStack stack;
  // The shared tier, when configured; the request path uses it, so it is
  // declared before (destroyed after) the service.
  std::unique_ptr<cache::RemoteTier> remote;
  // With --metrics-listen: what is counted (outlives the service, which
  // reports compiles to it) and, declared after everything it reads, the
  // endpoint that renders it (stopped first).
  std::unique_ptr<DaemonMetrics> metrics;
  std::unique_ptr<serving::KernelService> service;
  InFlightCalls calls;
  std::unique_ptr<CacheAdminRpc> admin;
  std::unique_ptr<CompilerRpc> compiler;
  std::unique_ptr<HealthRpc> health;
  std::unique_ptr<metrics::MetricsHttpServer> metrics_server;
  MemoryTrimmer trimmer;
  std::vector<std::unique_ptr<UnixSocketClaim>> claims;
  // Accepts on the Unix sockets and hands connections to gRPC; made before
  // the services (which ask it who a peer is), started once gRPC runs.
  std::unique_ptr<UnixAcceptor> acceptor;
  // The local path on the same sockets (local_server.h): stopped right
  // after the acceptor, before the services it calls.
  std::unique_ptr<LocalServer> local;
  std::unique_ptr<ListenerProbe> probe;
  std::atomic<bool> listener_deaf{false};
  // Without --admin-token-file: the token made at start, and its files.
  std::string generated_token;
  std::unique_ptr<AdminTokenFiles> token_files;
  std::unique_ptr<grpc::Server> grpc_server;
  std::vector<std::string> addresses;
  bool shut_down = false;

  ~Impl() {
    StopToolkitListener();
    probe.reset();
    if (acceptor != nullptr) acceptor->Stop();
    if (local != nullptr) local->Stop();
    if (grpc_server != nullptr && !shut_down) grpc_server->Shutdown();
  }

  // Raises the descriptor limit and sizes the connection bounds below it.
  void SizeConnections() {
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

  manifest::Toolchain CurrentToolchain() const {
    std::lock_guard lock(toolchain_mu);
    return toolchain;
  }

  // After this the listener is not running and will not run again.
  void StopToolkitListener() {
    if (toolkit != nullptr && toolkit_listener != 0) toolkit->RemoveListener(toolkit_listener);
    toolkit_listener = 0;
  }

  // The toolkit on disk changed (the watch logged it): the workers are
  // drained and restarted (they load the NVRTC on disk now) and the request
  // path resolves with the new toolchain, so every key names what compiles
  // use from here on. Jobs resolved before are refused by the pool (their
  // toolkit fingerprint is the old one). Runs inside ToolkitWatch::Check.
  void OnToolkitChanged(const compiler::ToolkitIdentity& now) {
    absl::StatusOr<manifest::Toolchain> changed = manifest::Toolchain::FromIdentity(now);
    if (!changed.ok()) {
      spdlog::error("toolkit changed, but its toolchain cannot be read: {}", changed.status().ToString());
      return;
    }
    {
      std::lock_guard lock(toolchain_mu);
      toolchain = *changed;
    }
    if (stack.pool != nullptr) stack.pool->RestartWorkers();
    if (service == nullptr) return;
    absl::StatusOr<std::unique_ptr<manifest::Resolver>> resolver = service->resolver()->WithToolchain(*changed);
    if (!resolver.ok()) {
      spdlog::error("toolkit changed, but the kernels do not resolve with it: {}; compiles are refused until SIGHUP",
                    resolver.status().ToString());
      return;
    }
    service->SwapResolver(std::shared_ptr<const manifest::Resolver>(*std::move(resolver)));
  }

  absl::Status OpenCache() {
    JITD_ASSIGN_OR_RETURN(std::unique_ptr<CacheDirLock> locked, CacheDirLock::Acquire(config.cache_dir, config.listen));
    dir_lock = std::move(locked);
    cache::CacheOptions options;
    options.dir = config.cache_dir;
    options.max_bytes = config.max_cache_bytes;
    absl::StatusOr<std::unique_ptr<cache::Cache>> opened = cache::Cache::Open(options);
    if (!opened.ok()) {
      return absl::Status(opened.status().code(),
                          Cat("cannot open the cache in ", config.cache_dir.string(), ": ", opened.status().message()));
    }
    cache = *std::move(opened);
    SweepOldKernelSnapshots(cache->dir());
    if (cache->rebuilt_index()) {
      spdlog::warn("the cache index in {} was unreadable and has been rebuilt from the blob files",
                   config.cache_dir.string());
    }
    return absl::OkStatus();
  }

  absl::Status LoadAdminToken() {
    if (config.admin_token_file.empty()) {
      JITD_ASSIGN_OR_RETURN(std::string token, NewAdminToken());
      generated_token = token;
      auth = AdminAuth(std::move(token),
                       "this daemon's token is in SOCKET.admin-token beside its Unix socket, readable by the "
                       "daemon's user, and jitd clients of that user read it by themselves");
      return absl::OkStatus();
    }
    JITD_ASSIGN_OR_RETURN(std::string token, ReadAdminTokenFile(config.admin_token_file));
    auth = AdminAuth(std::move(token));
    return absl::OkStatus();
  }

  // The kernels directory, checked by the namespace guard. Findings are
  // logged one per line; they are an error unless allow_guard_findings.
  absl::StatusOr<std::shared_ptr<const manifest::Resolver>> LoadGuardedKernels(std::string_view refusal) {
    absl::StatusOr<CheckedKernels> checked = LoadCheckedKernels(config.kernels_dir, CurrentToolchain(), config.arch);
    if (!checked.ok()) {
      return absl::Status(checked.status().code(), Cat("cannot load the kernels in ", config.kernels_dir.string(), ": ",
                                                       checked.status().message()));
    }
    if (!checked->findings.empty()) {
      for (const guard::Finding& finding : checked->findings) {
        if (config.allow_guard_findings) {
          spdlog::warn("namespace guard: {}", finding.ToString());
        } else {
          spdlog::error("namespace guard: {}", finding.ToString());
        }
      }
      if (!config.allow_guard_findings) {
        return absl::FailedPreconditionError(
            Cat("the kernels in ", config.kernels_dir.string(), " fail the namespace guard's source check with ",
                checked->findings.size(), " finding(s), logged above (`jitd lint --kernels ",
                config.kernels_dir.string(), "` lists them too); ", refusal));
      }
      spdlog::warn("serving kernels with {} namespace guard finding(s) (--allow-guard-findings)",
                   checked->findings.size());
    }
    return checked->resolver;
  }

  absl::Status StartServing() {
    JITD_ASSIGN_OR_RETURN(std::shared_ptr<compiler::ToolkitWatch> watch,
                          WatchToolkit(config.cuda_include, cache->dir()));
    toolkit = std::move(watch);
    JITD_ASSIGN_OR_RETURN(manifest::Toolchain detected, manifest::Toolchain::FromIdentity(toolkit->identity()));
    toolchain = std::move(detected);
    spdlog::info("toolkit: NVRTC {}, {} (identity {})", toolchain.nvrtc_version, toolkit->identity().Describe(),
                 toolchain.identity.substr(0, 12));
    absl::StatusOr<std::shared_ptr<const manifest::Resolver>> resolver = LoadGuardedKernels(
        "fix the sources, or start with --allow-guard-findings (allow_guard_findings = true in the config file) to "
        "serve them anyway");
    if (!resolver.ok()) return resolver.status();
    spdlog::info("kernels: {} from {}, fingerprint {}; NVRTC {}", KernelCount(**resolver), config.kernels_dir.string(),
                 ShortFingerprint(**resolver), toolchain.nvrtc_version);

    absl::StatusOr<CompileStack> started = StartCompileStack(*resolver, config.workers, config.max_queue, toolkit);
    if (!started.ok()) {
      return absl::Status(started.status().code(),
                          Cat("cannot start ", config.workers, " compile workers: ", started.status().message()));
    }
    stack = *std::move(started);

    JITD_RETURN_IF_ERROR(OpenRemote());
    serving::KernelService::Options options;
    options.hot_cache_bytes = config.hot_cache_bytes;
    options.negative_ttl = config.negative_ttl;
    options.max_queue = config.max_queue;
    // One client may start the workers' worth of compiles and half the
    // queue: the other half stays for everyone else. A queue of fewer than
    // 4 has no half worth keeping.
    options.max_compiles_per_peer = config.max_queue >= 4 ? config.workers + config.max_queue / 2 : 0;
    if (!config.metrics_listen.empty()) {
      JITD_ASSIGN_OR_RETURN(std::unique_ptr<DaemonMetrics> made, DaemonMetrics::Create());
      metrics = std::move(made);
      options.on_compile = [m = metrics.get()](std::string_view result, std::chrono::duration<double> wall) {
        m->ObserveCompile(result, wall);
      };
    }
    service = std::make_unique<serving::KernelService>(*resolver, cache.get(), stack.pool.get(), options, remote.get());
    stack.resolver.reset();
    toolkit_listener = toolkit->AddListener(
        [this](const compiler::ToolkitIdentity& now, const compiler::ToolkitIdentity&) { OnToolkitChanged(now); });
    compiler = std::make_unique<CompilerRpc>(
        *service, calls,
        CompilerRpc::Options{.workers = config.workers,
                             .log_hits = config.log_hits,
                             .max_calls_per_peer = config.max_calls_per_peer,
                             .peer_of = [a = acceptor.get()](const std::string& p) { return a->PeerOf(p); },
                             .metrics = metrics.get()});
    return StartMetrics();
  }

  // The Prometheus endpoint (--metrics-listen). Asked for explicitly, so
  // an address that cannot be bound stops the start.
  absl::Status StartMetrics() {
    if (metrics == nullptr) return absl::OkStatus();
    metrics->Collect({.cache = cache.get(),
                      .service = service.get(),
                      .pool = stack.pool.get(),
                      .remote = remote.get(),
                      .version = JITD_VERSION,
                      .nvrtc_version = toolchain.nvrtc_version});
    metrics::MetricsHttpServer::Options options;
    options.address = config.metrics_listen;
    options.render = [m = metrics.get()] { return m->Render(); };
    metrics_server = std::make_unique<metrics::MetricsHttpServer>(std::move(options));
    if (absl::Status started = metrics_server->Start(); !started.ok()) {
      return absl::Status(started.code(), Cat("--metrics-listen: ", started.message()));
    }
    return absl::OkStatus();
  }

  // The remote tier from --remote and its options. A store that cannot be
  // reached now is not an error (it may come up later: the circuit breaker
  // retries it); a malformed URL or an unreadable password file is.
  absl::Status OpenRemote() {
    if (config.remote.empty()) return absl::OkStatus();
    JITD_ASSIGN_OR_RETURN(cache::RemoteUrl url, cache::ParseRemoteUrl(config.remote));
    cache::RemoteOptions options;
    options.io_timeout = config.remote_timeout;
    options.connect_timeout = std::min(config.remote_timeout, std::chrono::milliseconds(1000));
    options.tls_ca = config.remote_tls_ca;
    options.tls_cert = config.remote_tls_cert;
    options.tls_key = config.remote_tls_key;
    // One lookup reads a value and a (small) failure marker: reading stops
    // past the value cap, before the value is buffered whole.
    options.max_reply_bytes = config.remote_max_value_bytes + kRemoteReplyOverheadBytes;
    if (!config.remote_password_file.empty()) {
      absl::StatusOr<std::string> text = files::ReadWholeFile(config.remote_password_file);
      if (!text.ok())
        return absl::Status(text.status().code(), Cat("--remote-password-file: ", text.status().message()));
      std::string password = text->substr(0, text->find_first_of("\r\n"));
      if (password.empty()) {
        return absl::InvalidArgumentError(
            Cat("--remote-password-file ", config.remote_password_file.string(), ": the first line is empty"));
      }
      options.password = std::move(password);
    }
    JITD_ASSIGN_OR_RETURN(std::unique_ptr<cache::RemoteBackend> backend, cache::OpenRedisBackend(url, options));
    cache::RemoteTierOptions tier_options;
    if (!config.remote_signing_key_file.empty()) {
      absl::StatusOr<std::string> key = files::ReadWholeFile(config.remote_signing_key_file);
      if (!key.ok())
        return absl::Status(key.status().code(), Cat("--remote-signing-key-file: ", key.status().message()));
      while (!key->empty() && std::isspace(static_cast<unsigned char>(key->back()))) key->pop_back();
      if (key->size() < 16) {
        return absl::InvalidArgumentError(Cat("--remote-signing-key-file ", config.remote_signing_key_file.string(),
                                              ": the key is ", key->size(),
                                              " bytes; at least 16 are needed (openssl rand -hex 32 > FILE)"));
      }
      tier_options.signing_key = *std::move(key);
    }
    // A remembered failure is shared as long as it is remembered locally.
    remote = std::make_unique<cache::RemoteTier>(std::move(backend), tier_options);
    if (absl::Status reachable = remote->Check(); reachable.ok()) {
      spdlog::info("remote tier {}: reachable; lease owner {}", remote->Describe(), remote->options().owner);
    } else {
      spdlog::warn("remote tier {} is not reachable now ({}); serving locally until it is", remote->Describe(),
                   reachable.ToString());
    }
    return absl::OkStatus();
  }

  // Refuses what the configuration alone makes impossible (an address
  // gRPC must not serve, TCP without TLS, an unknown socket group) before
  // any side effect: no cache directory, worker or socket is made first.
  absl::Status CheckConfig() {
    std::vector<std::string> tcp;
    for (const std::string& text : config.listen) {
      JITD_ASSIGN_OR_RETURN(ListenAddress address, ParseListenAddress(text));
      if (address.kind == ListenAddress::Kind::kTcp) tcp.push_back(address.host_port);
    }
    JITD_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials, TcpCredentials(config, tcp));
    tcp_credentials = std::move(credentials);
    if (!config.socket_group.empty() && ::getgrnam(config.socket_group.c_str()) == nullptr) {
      return absl::InvalidArgumentError(Cat("no group '", config.socket_group, "' (--socket-group)"));
    }
    return absl::OkStatus();
  }

  // Parses and claims every address, then builds and starts the server.
  absl::Status Listen() {
    std::vector<ListenAddress> listen;
    for (const std::string& text : config.listen) {
      JITD_ASSIGN_OR_RETURN(ListenAddress address, ParseListenAddress(text));
      if (address.kind == ListenAddress::Kind::kUnix) {
        JITD_ASSIGN_OR_RETURN(std::unique_ptr<UnixSocketClaim> claim, UnixSocketClaim::Acquire(address.unix_path));
        if (claim->removed_stale()) {
          spdlog::info("removed the stale socket {} (no process was accepting on it)", address.unix_path.string());
        }
        claims.push_back(std::move(claim));
        JITD_RETURN_IF_ERROR(acceptor->Listen(address.unix_path));
      }
      listen.push_back(std::move(address));
    }

    // Before the server starts: a client that sees SERVING finds the token.
    std::error_code ignored;
    if (!generated_token.empty()) {
      std::vector<std::filesystem::path> sockets;
      for (const auto& claim : claims) sockets.push_back(claim->path());
      if (sockets.empty()) {
        spdlog::warn(
            "no Unix socket: Evict and Verify --repair are refused on this daemon unless it is started "
            "with --admin-token-file");
      }
      JITD_ASSIGN_OR_RETURN(std::unique_ptr<AdminTokenFiles> written, AdminTokenFiles::Write(generated_token, sockets));
      token_files = std::move(written);
      std::vector<std::string> files;
      for (const auto& socket : sockets) files.push_back(AdminTokenFileFor(socket).string());
      if (!files.empty()) {
        auth.SetWhere(Cat("this daemon's token is in ", Join(files, " and "),
                          ", readable by the daemon's user only; jitctl run as that user reads it by itself"));
      }
    } else {
      // --admin-token-file: a token file a killed daemon left beside the
      // socket would only mislead clients.
      for (const auto& claim : claims) std::filesystem::remove(AdminTokenFileFor(claim->path()), ignored);
    }

    // Process-wide switches that must precede the builder. jitd serves
    // grpc.health.v1 itself (health_rpc.h says why).
    grpc::EnableDefaultHealthCheckService(false);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    health = std::make_unique<HealthRpc>(
        std::set<std::string>{v1::Compiler::service_full_name(), v1::CacheAdmin::service_full_name()});
    grpc::ServerBuilder builder;
    builder.SetMaxReceiveMessageSize(kMaxReceiveMessageBytes);
    builder.SetMaxSendMessageSize(kMaxSendMessageBytes);
    // TCP addresses are gRPC's to accept on; the Unix sockets are the
    // acceptor's, which hands each connection over (unix_acceptor.h says why).
    std::vector<int> ports(listen.size(), 0);
    for (size_t i = 0; i < listen.size(); ++i) {
      if (listen[i].kind == ListenAddress::Kind::kTcp) {
        builder.AddListeningPort(listen[i].GrpcTarget(), tcp_credentials, &ports[i]);
      }
    }
    builder.RegisterService(admin.get());
    builder.RegisterService(compiler.get());
    builder.RegisterService(health.get());
    grpc_server = builder.BuildAndStart();
    if (grpc_server == nullptr) {
      return absl::UnavailableError(
          Cat("cannot listen on ", Join(config.listen, ", "), " (gRPC's reason is logged above)"));
    }
    for (size_t i = 0; i < listen.size(); ++i) {
      if (listen[i].kind == ListenAddress::Kind::kUnix) {
        addresses.push_back(listen[i].GrpcTarget());
        continue;
      }
      const std::string& host_port = listen[i].host_port;
      addresses.push_back(Cat(host_port.substr(0, host_port.rfind(':')), ":", ports[i]));
    }
    for (const auto& claim : claims) {
      JITD_RETURN_IF_ERROR(claim->RestrictMode());
      if (!config.socket_group.empty()) {
        const struct group* group = ::getgrnam(config.socket_group.c_str());
        if (group == nullptr) return absl::InvalidArgumentError(Cat("no group '", config.socket_group, "'"));
        if (::chown(claim->path().c_str(), static_cast<uid_t>(-1), group->gr_gid) != 0) {
          return absl::FailedPreconditionError(Cat("cannot give ", claim->path().string(), " to group ",
                                                   config.socket_group, ": ", std::strerror(errno),
                                                   " (the daemon's user must be a member of it)"));
        }
      }
    }
    std::function<void(int, bool)> local_hand_off;
    if (config.local_path) {
      local = std::make_unique<LocalServer>(LocalServer::Options{
          .answer = [c = compiler.get()](const v1::GetKernelRequest& request, const std::string& peer) {
            return c->AnswerLocal(request, peer);
          }});
      JITD_RETURN_IF_ERROR(local->Start());
      local_hand_off = [l = local.get()](int fd, bool greeted) { l->Adopt(fd, greeted); };
    } else {
      spdlog::info("local path: off (--no-local-path): the Unix sockets serve gRPC only");
    }
    if (absl::Status started =
            acceptor->Start([server = grpc_server.get()](int fd) { grpc::AddInsecureChannelFromFd(server, fd); },
                            std::move(local_hand_off));
        !started.ok()) {
      return started;
    }
    StartProbe();
    return absl::OkStatus();
  }

  // With --listen-probe-interval: a listener that stops accepting ends the
  // daemon (SIGTERM to itself: main drains, then exits kExitListenerDeaf).
  void StartProbe() {
    if (config.listen_probe_interval.count() == 0) return;
    ListenerProbe::Options options;
    options.addresses = addresses;
    options.interval = config.listen_probe_interval;
    options.on_deaf = [this](const std::string& address, const std::string& why) {
      spdlog::error(
          "{} has stopped accepting connections ({}; {} probes in a row unanswered): exiting with status {} so "
          "that the supervisor restarts jitd",
          address, why, 3, kExitListenerDeaf);
      listener_deaf = true;
      ::kill(::getpid(), SIGTERM);
    };
    probe = std::make_unique<ListenerProbe>(std::move(options));
  }
};

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const DaemonConfig& config) {
  const auto started = std::chrono::steady_clock::now();
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  JITD_RETURN_IF_ERROR(impl->CheckConfig());
  JITD_RETURN_IF_ERROR(impl->LoadAdminToken());
  impl->SizeConnections();
  JITD_RETURN_IF_ERROR(impl->OpenCache());
  JITD_RETURN_IF_ERROR(impl->StartServing());
  ServingStatsSources sources{impl->service.get(), impl->stack.pool.get(), config.max_queue, config.kernels_dir,
                              impl->remote.get()};
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
  return Cat(KernelCount(*resolver), " kernels from ", impl_->config.kernels_dir.string(), ", fingerprint ",
             ShortFingerprint(*resolver));
}

absl::Status Server::ReloadKernels() {
  const std::shared_ptr<const manifest::Resolver> old = impl_->service->resolver();
  // A toolkit change is noticed here too, not only by the next compile: the
  // listener swaps in the new toolchain before the kernels are re-read.
  if (absl::StatusOr<compiler::ToolkitWatch::Observation> checked = impl_->toolkit->Check(); !checked.ok()) {
    spdlog::warn("SIGHUP: the toolkit cannot be checked: {}", checked.status().ToString());
  }
  spdlog::info("SIGHUP: re-reading the kernels in {}", impl_->config.kernels_dir.string());
  absl::StatusOr<std::shared_ptr<const manifest::Resolver>> loaded =
      impl_->LoadGuardedKernels(Cat("still serving the previous kernels (fingerprint ", ShortFingerprint(*old), ")"));
  if (!loaded.ok()) return loaded.status();
  impl_->service->SwapResolver(*loaded);
  // A toolkit change noticed while the kernels were read swapped in the old
  // kernels under the new toolchain: these kernels get it too.
  for (int attempt = 0; attempt < 3; ++attempt) {
    const manifest::Toolchain now = impl_->CurrentToolchain();
    if ((*loaded)->toolchain().identity == now.identity) break;
    JITD_ASSIGN_OR_RETURN(std::unique_ptr<manifest::Resolver> rebuilt, (*loaded)->WithToolchain(now));
    *loaded = std::shared_ptr<const manifest::Resolver>(std::move(rebuilt));
    impl_->service->SwapResolver(*loaded);
  }
  spdlog::info("reloaded kernels: {} kernels, fingerprint {} (was {})", KernelCount(**loaded),
               ShortFingerprint(**loaded), ShortFingerprint(*old));
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
