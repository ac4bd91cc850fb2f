#include "jitd/keys/field_digest.h"

#include <cstdint>

namespace jitd::keys {

void FieldDigest::Field(std::string_view tag, std::string_view value) {
  sha_.Update(tag);
  const uint64_t size = value.size();
  sha_.Update(std::string_view(reinterpret_cast<const char*>(&size), sizeof size));
  sha_.Update(value);
}

std::string FieldDigest::Hex() { return sha_.FinalHex(); }

}  // namespace jitd::keys
