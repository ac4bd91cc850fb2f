#include "server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "admin_auth.h"
#include "cache_admin_service.h"
#include "compiler_service.h"
#include "jitd/cache.h"
#include "jitd/client.h"
#include "listen_address.h"
#include "unix_socket_claim.h"

namespace jitd::daemon {

// Members are destroyed in reverse order: the gRPC server first (no call
// runs after that), then the socket claims (the files go once nobody
// listens), then the services and the cache they use.
class Server::Impl {
 public:
  std::unique_ptr<cache::Cache> cache;
  AdminAuth auth;
  std::unique_ptr<CacheAdminService> admin;
  CompilerService compiler;
  std::vector<std::unique_ptr<UnixSocketClaim>> claims;
  std::unique_ptr<grpc::Server> grpc_server;
  std::vector<std::string> addresses;
  bool shut_down = false;

  ~Impl() {
    if (grpc_server != nullptr && !shut_down) grpc_server->Shutdown();
  }

  absl::Status OpenCache(const DaemonConfig& config) {
    cache::CacheOptions options;
    options.dir = config.cache_dir;
    options.max_bytes = config.max_cache_bytes;
    absl::StatusOr<std::unique_ptr<cache::Cache>> opened = cache::Cache::Open(options);
    if (!opened.ok()) {
      return absl::Status(opened.status().code(), absl::StrCat("cannot open the cache in ", config.cache_dir.string(),
                                                               ": ", opened.status().message()));
    }
    cache = *std::move(opened);
    if (cache->rebuilt_index()) {
      spdlog::warn("the cache index in {} was unreadable and has been rebuilt from the blob files",
                   config.cache_dir.string());
    }
    return absl::OkStatus();
  }

  absl::Status LoadAdminToken(const DaemonConfig& config) {
    if (config.admin_token_file.empty()) return absl::OkStatus();
    absl::StatusOr<std::string> token = ReadAdminTokenFile(config.admin_token_file);
    if (!token.ok()) return token.status();
    auth = AdminAuth(*std::move(token));
    return absl::OkStatus();
  }

  // Parses and claims every address, then builds and starts the server.
  absl::Status Listen(const DaemonConfig& config) {
    std::vector<ListenAddress> listen;
    for (const std::string& text : config.listen) {
      absl::StatusOr<ListenAddress> address = ParseListenAddress(text);
      if (!address.ok()) return address.status();
      if (address->kind == ListenAddress::Kind::kUnix) {
        absl::StatusOr<std::unique_ptr<UnixSocketClaim>> claim = UnixSocketClaim::Acquire(address->unix_path);
        if (!claim.ok()) return claim.status();
        if ((*claim)->removed_stale()) {
          spdlog::info("removed the stale socket {} (no process was accepting on it)", address->unix_path.string());
        }
        claims.push_back(*std::move(claim));
      }
      listen.push_back(*std::move(address));
    }

    // Both are process-wide switches that must precede the builder.
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    std::vector<int> ports(listen.size(), 0);
    for (size_t i = 0; i < listen.size(); ++i) {
      builder.AddListeningPort(listen[i].GrpcTarget(), grpc::InsecureServerCredentials(), &ports[i]);
    }
    builder.RegisterService(admin.get());
    builder.RegisterService(&compiler);
    grpc_server = builder.BuildAndStart();
    if (grpc_server == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen on ", absl::StrJoin(config.listen, ", "), " (gRPC's reason is logged above)"));
    }
    for (size_t i = 0; i < listen.size(); ++i) {
      if (listen[i].kind == ListenAddress::Kind::kUnix) {
        addresses.push_back(listen[i].GrpcTarget());
        continue;
      }
      const std::string& host_port = listen[i].host_port;
      addresses.push_back(absl::StrCat(host_port.substr(0, host_port.rfind(':')), ":", ports[i]));
    }
    for (const auto& claim : claims) {
      if (absl::Status restricted = claim->RestrictMode(); !restricted.ok()) return restricted;
    }
    return absl::OkStatus();
  }
};

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const DaemonConfig& config) {
  const auto started = std::chrono::steady_clock::now();
  auto impl = std::make_unique<Impl>();
  if (absl::Status loaded = impl->LoadAdminToken(config); !loaded.ok()) return loaded;
  if (absl::Status opened = impl->OpenCache(config); !opened.ok()) return opened;
  impl->admin = std::make_unique<CacheAdminService>(*impl->cache, impl->auth, started);
  if (absl::Status listening = impl->Listen(config); !listening.ok()) return listening;
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() = default;

const std::vector<std::string>& Server::addresses() const { return impl_->addresses; }

absl::Status Server::Shutdown(std::chrono::milliseconds drain) {
  if (impl_->shut_down) return absl::OkStatus();
  impl_->shut_down = true;
  // NOT_SERVING first, so load balancers and readiness probes stop sending
  // work while the calls in flight finish.
  impl_->grpc_server->GetHealthCheckService()->Shutdown();
  impl_->grpc_server->Shutdown(std::chrono::system_clock::now() + drain);
  return impl_->cache->Flush();
}

}  // namespace jitd::daemon
