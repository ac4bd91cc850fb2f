// The client's one mapping from gRPC's status to absl::Status.
#pragma once

#include <grpcpp/support/status.h>

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace jitd::client_detail {

// Carries the code and the daemon's message over unchanged; when the daemon
// could not be reached (UNAVAILABLE), the message says so and names
// `endpoint`, since gRPC's own text ("failed to connect to all addresses")
// does not say which daemon was meant.
absl::Status FromGrpcStatus(const grpc::Status& status, std::string_view endpoint);

// Why a Unix socket that exists took no connection: the daemon closes one
// beyond its bounds with an HTTP/2 GOAWAY whose text says which bound
// (unix_acceptor.h), which gRPC does not pass on, so the client asks again
// on a connection of its own. "" when that tells nothing (not a unix:
// endpoint, a connection let in); waits at most about a second.
std::string RefusalReason(std::string_view endpoint);

// When `status` is gRPC's transport error (no connection: "Broken pipe"
// and the like) on a Unix socket whose daemon refuses this user's
// connections now, UNAVAILABLE "cannot reach jitd at E: the daemon refused
// the connection: <which bound>"; nullopt otherwise. A client whose first
// connection got in and whose next was refused (its share full) is told
// which bound it met, not that the daemon may be down.
std::optional<absl::Status> RefusedBy(const grpc::Status& status, std::string_view endpoint);

// A call's status: RefusedBy's when there is one, else FromGrpcStatus's.
absl::Status FromGrpcCall(const grpc::Status& status, std::string_view endpoint);

}  // namespace jitd::client_detail
