// Server::Impl: what a running daemon holds, and the steps that start it,
// shared by the three files that define them:
//   server.cpp          the start order, the toolkit listener, reload and
//                       shutdown (the public methods of server.h)
//   server_serving.cpp  what requests are served from: the cache, the
//                       admin token, the guarded kernels, the compile
//                       workers, the remote tier, the request path, metrics
//   server_listen.cpp   who may reach it: the configuration's addresses,
//                       the Unix sockets and their token files, gRPC, the
//                       local path, the acceptor and the listener probe
// Internal to jitd_daemon; nothing outside app/ includes it.
#pragma once

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "app/compile_stack.h"
#include "app/server.h"
#include "compiler/toolkit_watch.h"
#include "jitd/bundle.h"
#include "manifest/manifest.h"
#include "metrics/http_server.h"
#include "remote/remote.h"
#include "rpc/cache_admin_rpc.h"
#include "rpc/compiler_rpc.h"
#include "rpc/daemon_metrics.h"
#include "rpc/health_rpc.h"
#include "rpc/in_flight_calls.h"
#include "rpc/local_server.h"
#include "security/admin_auth.h"
#include "security/admin_token_files.h"
#include "security/listen_address.h"
#include "security/listener_probe.h"
#include "security/unix_acceptor.h"
#include "security/unix_socket_claim.h"
#include "serving/kernel_service.h"
#include "serving/kernel_trees.h"
#include "serving/rewarm.h"
#include "system/cache_dir_lock.h"
#include "system/memory_trim.h"

namespace jitd::daemon {

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
  // The kernel trees, read and guarded tree by tree (at start and SIGHUP).
  std::unique_ptr<serving::KernelTrees> trees;
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
  // --bundle: mounted read-only below the disk, verified at start; the
  // request path reads them, so they too outlive the service.
  std::vector<std::unique_ptr<cache::Bundle>> bundles;
  // With --metrics-listen: what is counted (outlives the service, which
  // reports compiles to it) and, declared after everything it reads, the
  // endpoint that renders it (stopped first).
  std::unique_ptr<DaemonMetrics> metrics;
  std::unique_ptr<serving::KernelService> service;
  // Recompiles the hot set after a toolkit change (running or since the
  // last start); stopped
  // before the service it submits to.
  std::unique_ptr<serving::Rewarmer> rewarmer;
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

  ~Impl();

  // Raises the descriptor limit and sizes the connection bounds below it.
  void SizeConnections();

  // The toolchain compiles use now (OnToolkitChanged replaces it).
  manifest::Toolchain CurrentToolchain() const;

  // After this the listener is not running and will not run again.
  void StopToolkitListener();

  // The toolkit on disk changed (the watch logged it): the workers are
  // drained and restarted (they load the NVRTC on disk now) and the request
  // path resolves with the new toolchain, so every key names what compiles
  // use from here on. Jobs resolved before are refused by the pool (their
  // toolkit fingerprint is the old one). Runs inside ToolkitWatch::Check.
  void OnToolkitChanged(const compiler::ToolkitIdentity& now);

  // After a module build, before it is answered (the pool's
  // check_module_build): the module toolchain on disk must still be the
  // one the job's key names. When it is not, the module toolchain is
  // detected again and the request path resolves with it (new keys, the
  // hot set rewarmed): the build is discarded, and the retry builds under
  // the new key.
  absl::Status CheckModuleBuild(const compiler::CompileJob& job);
  // Gives the request path a resolver under CurrentToolchain() (its
  // toolkit and module toolchain), unless it has one already.
  absl::Status AdoptLatestToolchain();
  void OnModuleToolchainChanged(const std::string& now);
  // On SIGHUP: the module toolchain on disk against the one detected, and
  // OnModuleToolchainChanged when they differ.
  void CheckModuleToolchain();

  // Locks the cache directory (one daemon per cache) and opens the cache.
  absl::Status OpenCache();

  // --admin-token-file's token, or one made now (Listen writes it beside
  // the Unix sockets).
  absl::Status LoadAdminToken();

  // The toolkit watch, the guarded kernels, the compile workers, the remote
  // tier, the request path and the Compiler service over it, then metrics.
  absl::Status StartServing();

  // The Prometheus endpoint (--metrics-listen). Asked for explicitly, so
  // an address that cannot be bound stops the start.
  absl::Status StartMetrics();

  // The remote tier from --remote and its options. A store that cannot be
  // reached now is not an error (it may come up later: the circuit breaker
  // retries it); a malformed URL or an unreadable password file is.
  absl::Status OpenRemote();

  // The cache directory's record of the toolkit it was last served with
  // (kToolkitRecord): replaced by `identity`; what it held, or nullopt
  // when there was none (a new cache, or one from before the record).
  std::optional<std::string> RememberToolkit(const std::string& identity);
  static constexpr char kToolkitRecord[] = "toolkit-identity";

  // Opens and verifies every --bundle, in order: a bundle that does not
  // verify whole (naming its first bad entry), or that is not signed with
  // --remote-signing-key-file's key when there is one, stops the start.
  absl::Status MountBundles();
  // What built the modules of the mounted bundles (a daemon without nvcc
  // serves those: manifest::ModuleToolchainSource).
  std::vector<std::string> BundledModuleBuilders() const;

  // Refuses what the configuration alone makes impossible (an address
  // gRPC must not serve, TCP without TLS, an unknown socket group) before
  // any side effect: no cache directory, worker or socket is made first.
  absl::Status CheckConfig();

  // Parses and claims every address, then builds and starts the server:
  // the private steps below, in their order.
  absl::Status Listen();

  // With --listen-probe-interval: a listener that stops accepting ends the
  // daemon (SIGTERM to itself: main drains, then exits kExitListenerDeaf).
  void StartProbe();

 private:
  // Parses every address and claims the Unix sockets, on which the acceptor
  // listens (TCP addresses are gRPC's, bound by StartGrpc).
  absl::StatusOr<std::vector<ListenAddress>> ClaimSockets();
  // Before the server starts: a client that sees SERVING finds the token.
  absl::Status WriteTokenFiles();
  // Builds and starts the gRPC server with its three services on the TCP
  // addresses, and fills `addresses` (TCP ports as bound).
  absl::Status StartGrpc(const std::vector<ListenAddress>& listen);
  // The Unix sockets 0660, and given to --socket-group when one is named.
  absl::Status RestrictSockets();
  // The local path (unless --no-local-path), then the acceptor that hands
  // each Unix connection to it or to gRPC.
  absl::Status StartAcceptor();
};

}  // namespace jitd::daemon
