// What protects the daemon's TCP addresses. A Unix socket is protected by
// its file mode (0660) and directory; a TCP port by nothing but this: TLS
// with the operator's certificate (and, with a client CA, mutual TLS), or
// plaintext only when asked for by name (--insecure-tcp), with a warning.
#pragma once

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.h"

namespace jitd::daemon {

// Credentials for the TCP addresses `tcp` (HOST:PORT texts) under
// `config`; null when `tcp` is empty. FAILED_PRECONDITION when TCP is asked
// for without TLS and without insecure_tcp; INVALID_ARGUMENT for a
// certificate without a key (or the reverse), a client CA without a
// certificate, or a PEM file that cannot be read or is empty.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TcpCredentials(const DaemonConfig& config,
                                                                        const std::vector<std::string>& tcp);

}  // namespace jitd::daemon
