// Who may call the CacheAdmin RPCs that change state (Evict, Verify with
// repair): callers that send the metadata "authorization: Bearer <token>",
// the token being --admin-token-file's or, without it, the one the daemon
// made at start (admin_token_files.h). Reading calls are always open.
#pragma once

#include <grpcpp/server_context.h>

#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace jitd::daemon {

class AdminAuth {
 public:
  // Everyone is allowed (no --admin-token-file).
  AdminAuth() = default;
  // Only holders of `token` are allowed. `where` tells a refused caller
  // where the token can be found, if anywhere.
  explicit AdminAuth(std::string token, std::string where = "") : token_(std::move(token)), where_(std::move(where)) {}
  AdminAuth(const AdminAuth&) = delete;
  AdminAuth& operator=(AdminAuth&& other) noexcept {
    token_ = std::move(other.token_);
    where_ = std::move(other.where_);
    return *this;
  }

  // OK when allowed; PERMISSION_DENIED naming `action` and what to send
  // otherwise. Thread-safe (const, no state).
  absl::Status Authorize(const grpc::ServerContext& context, const std::string& action) const;

  bool required() const { return !token_.empty(); }

  // Where the token is, for a refused caller ("the daemon's token is in
  // /run/jitd/jitd.sock.admin-token, readable by ..."): known once the
  // sockets are claimed.
  void SetWhere(std::string where);

 private:
  std::string Where() const;
  std::string token_;
  mutable std::mutex where_mu_;
  std::string where_;  // guarded by where_mu_
};

}  // namespace jitd::daemon
