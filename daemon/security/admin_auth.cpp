#include "security/admin_auth.h"

#include "jitd/base/text.h"

namespace jitd::daemon {
namespace {

constexpr std::string_view kBearer = "Bearer ";

// Compares in time independent of where the strings differ, so response
// times do not reveal how much of a guessed token was right.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    difference |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return difference == 0;
}

}  // namespace

std::string AdminAuth::Where() const {
  std::lock_guard lock(where_mu_);
  return where_.empty() ? std::string() : text::Cat(" (", where_, ")");
}

void AdminAuth::SetWhere(std::string where) {
  std::lock_guard lock(where_mu_);
  where_ = std::move(where);
}

absl::Status AdminAuth::Authorize(const grpc::ServerContext& context, const std::string& action) const {
  if (token_.empty()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  const auto header = metadata.find("authorization");
  if (header == metadata.end()) {
    return absl::PermissionDeniedError(text::Cat(action, " needs the admin token: jitctl --admin-token-file FILE",
                                                 where_.empty() ? "" : Where(),
                                                 "; other clients send it as 'authorization: Bearer <token>'"));
  }
  const std::string_view value(header->second.data(), header->second.size());
  if (value.substr(0, kBearer.size()) != kBearer || !ConstantTimeEquals(value.substr(kBearer.size()), token_)) {
    return absl::PermissionDeniedError(
        text::Cat(action, " was refused: the admin token sent does not match the daemon's"));
  }
  return absl::OkStatus();
}

}  // namespace jitd::daemon
