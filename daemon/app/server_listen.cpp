#include <grp.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/server_posix.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "app/server_impl.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "security/tcp_credentials.h"

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

}  // namespace

absl::Status Server::Impl::CheckConfig() {
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

absl::Status Server::Impl::Listen() {
  JITD_ASSIGN_OR_RETURN(std::vector<ListenAddress> listen, ClaimSockets());
  JITD_RETURN_IF_ERROR(WriteTokenFiles());
  JITD_RETURN_IF_ERROR(StartGrpc(listen));
  JITD_RETURN_IF_ERROR(RestrictSockets());
  JITD_RETURN_IF_ERROR(StartAcceptor());
  StartProbe();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ListenAddress>> Server::Impl::ClaimSockets() {
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
  return listen;
}

absl::Status Server::Impl::WriteTokenFiles() {
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
  return absl::OkStatus();
}

absl::Status Server::Impl::StartGrpc(const std::vector<ListenAddress>& listen) {
  // Process-wide switches that must precede the builder. jitd serves
  // grpc.health.v1 itself (health_rpc.h says why).
  grpc::EnableDefaultHealthCheckService(false);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  health = std::make_unique<HealthRpc>(
      std::set<std::string>{v1::Compiler::service_full_name(), v1::CacheAdmin::service_full_name()},
      [trees = trees.get()](std::string_view tree) { return trees->Serving(tree); });
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
  return absl::OkStatus();
}

absl::Status Server::Impl::RestrictSockets() {
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
  return absl::OkStatus();
}

absl::Status Server::Impl::StartAcceptor() {
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
  JITD_RETURN_IF_ERROR(acceptor->Start(
      [server = grpc_server.get()](int fd) { grpc::AddInsecureChannelFromFd(server, fd); }, std::move(local_hand_off)));
  return absl::OkStatus();
}

void Server::Impl::StartProbe() {
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

}  // namespace jitd::daemon
