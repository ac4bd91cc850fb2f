#include "security/signing_key.h"

#include <cctype>

#include "jitd/base/files.h"
#include "jitd/base/text.h"

namespace jitd::daemon {

absl::StatusOr<std::string> ReadSigningKeyFile(const std::filesystem::path& path, std::string_view flag) {
  absl::StatusOr<std::string> key = files::ReadWholeFile(path);
  if (!key.ok()) return absl::Status(key.status().code(), text::Cat(flag, ": ", key.status().message()));
  while (!key->empty() && std::isspace(static_cast<unsigned char>(key->back()))) key->pop_back();
  if (key->size() < kMinSigningKeyBytes) {
    return absl::InvalidArgumentError(text::Cat(flag, " ", path.string(), ": the key is ", key->size(),
                                                " bytes; at least ", kMinSigningKeyBytes,
                                                " are needed (openssl rand -hex 32 > FILE)"));
  }
  return key;
}

}  // namespace jitd::daemon
