#include "security/tcp_credentials.h"

#include <grpcpp/security/server_credentials.h>
#include <spdlog/spdlog.h>

#include "jitd/base/files.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"

namespace jitd::daemon {
namespace {

using text::Cat;
using text::Join;

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TcpCredentials(const DaemonConfig& config,
                                                                        const std::vector<std::string>& tcp) {
  const bool cert = !config.tls_cert.empty(), key = !config.tls_key.empty(), ca = !config.tls_client_ca.empty();
  if (cert != key) return absl::InvalidArgumentError("--tls-cert and --tls-key go together: give both or neither");
  if (ca && !cert) {
    return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is TLS first)");
  }
  if (tcp.empty()) {
    if (cert) spdlog::warn("--tls-cert is set but no --listen address is TCP: it is not used");
    return std::shared_ptr<grpc::ServerCredentials>();
  }
  if (cert) {
    JITD_ASSIGN_OR_RETURN(std::string chain, files::ReadPemFile(config.tls_cert, "--tls-cert"));
    JITD_ASSIGN_OR_RETURN(std::string private_key, files::ReadPemFile(config.tls_key, "--tls-key"));
    grpc::SslServerCredentialsOptions options(ca ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                                 : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    options.pem_key_cert_pairs.push_back({private_key, chain});
    if (ca) {
      JITD_ASSIGN_OR_RETURN(std::string roots, files::ReadPemFile(config.tls_client_ca, "--tls-client-ca"));
      options.pem_root_certs = roots;
    }
    spdlog::info("TLS on {}{}", Join(tcp, " "), ca ? " (client certificates required)" : "");
    return grpc::SslServerCredentials(options);
  }
  if (!config.insecure_tcp) {
    return absl::FailedPreconditionError(
        Cat("--listen ", Join(tcp, " "),
            " opens a TCP port: give --tls-cert and --tls-key (and --tls-client-ca to require client "
            "certificates), or --insecure-tcp to serve plaintext on a network you trust"));
  }
  spdlog::warn(
      "serving plaintext TCP on {} (--insecure-tcp): whoever reaches the port can call jitd and read "
      "what it answers",
      Join(tcp, " "));
  return grpc::InsecureServerCredentials();
}

}  // namespace jitd::daemon
