#include "jitd/keys/field_digest.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "jitd/base/hex.h"

namespace jitd::keys {

void FieldDigest::Field(std::string_view tag, std::string_view value) {
  sha_.Update(tag);
  const uint64_t size = value.size();
  sha_.Update(std::string_view(reinterpret_cast<const char*>(&size), sizeof size));
  sha_.Update(value);
}

std::string FieldDigest::Hex() {
  absl::StatusOr<std::string> raw = sha_.Final();
  if (!raw.ok()) {
    // A key that matched nothing would silently recompile everything.
    std::fprintf(stderr, "jitd: %s\n", std::string(raw.status().message()).c_str());
    std::abort();
  }
  return hex::Encode(*raw);
}

}  // namespace jitd::keys
