// The admin token file format, shared by the daemon and jitctl.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "jitd/client.h"
#include "jitd/detail/text.h"

namespace jitd {

using text::Cat;

absl::StatusOr<std::string> ReadAdminTokenFile(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::NotFoundError(Cat("cannot read admin token file ", path.string(), ": ", std::strerror(errno)));
  }
  std::stringstream content;
  content << file.rdbuf();
  const std::string token(absl::StripAsciiWhitespace(content.str()));
  if (token.empty()) {
    return absl::InvalidArgumentError(Cat("admin token file ", path.string(), " holds no token"));
  }
  for (const char c : token) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) || !absl::ascii_isprint(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(
          Cat("admin token file ", path.string(),
              " holds whitespace or control characters inside its token; use one line of printable text"));
    }
  }
  return token;
}

}  // namespace jitd
