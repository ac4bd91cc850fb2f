// The fleet's shared secret, read from a file: what signs the remote tier's
// values (--remote-signing-key-file) and sealed seed bundles
// (`jitd bundle create|verify --signing-key-file`).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace jitd::daemon {

// A key shorter than this is refused: 16 bytes is 128 bits of a random key.
inline constexpr size_t kMinSigningKeyBytes = 16;

// The file's contents less trailing white space (a newline `openssl rand
// -hex 32 > FILE` leaves). Errors name `flag` and the file: unreadable (the
// read's code), or a key under kMinSigningKeyBytes (INVALID_ARGUMENT).
absl::StatusOr<std::string> ReadSigningKeyFile(const std::filesystem::path& path, std::string_view flag);

}  // namespace jitd::daemon
