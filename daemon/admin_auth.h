// Who may call the CacheAdmin RPCs that change state (Evict, Verify with
// repair): anyone, or, with --admin-token-file, callers that send the
// metadata "authorization: Bearer <token>". Reading calls are always open.
#pragma once

#include <grpcpp/server_context.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace jitd::daemon {

class AdminAuth {
 public:
  // Everyone is allowed (no --admin-token-file).
  AdminAuth() = default;
  // Only holders of `token` are allowed.
  explicit AdminAuth(std::string token) : token_(std::move(token)) {}

  // OK when allowed; PERMISSION_DENIED naming `action` and what to send
  // otherwise. Thread-safe (const, no state).
  absl::Status Authorize(const grpc::ServerContext& context, const std::string& action) const;

  bool required() const { return !token_.empty(); }

 private:
  std::string token_;
};

}  // namespace jitd::daemon
