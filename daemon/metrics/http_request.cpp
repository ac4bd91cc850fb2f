#include "metrics/http_request.h"

#include <algorithm>
#include <vector>

namespace jitd::metrics {
namespace {

bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAsciiAlnum(char c) { return IsAsciiDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsHost(std::string_view name) {
  return name.size() == 4 && std::equal(name.begin(), name.end(), "host", [](char a, char b) {
           return (a >= 'A' && a <= 'Z' ? static_cast<char>(a - 'A' + 'a') : a) == b;
         });
}

bool IsTchar(char c) {
  return IsAsciiAlnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), IsTchar); }

// The head's lines up to the blank one, line ends removed.
std::vector<std::string_view> HeadLines(std::string_view head) {
  std::vector<std::string_view> lines;
  for (size_t pos = head.find_first_not_of("\r\n"); pos < head.size();) {
    size_t nl = head.find('\n', pos);
    if (nl == std::string_view::npos) nl = head.size();
    std::string_view line = head.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) break;  // the blank line that ends the head
    lines.push_back(line);
    pos = nl + 1;
  }
  return lines;
}

}  // namespace

size_t RequestHeadLength(std::string_view in) {
  const size_t start = in.find_first_not_of("\r\n");
  if (start == std::string_view::npos) return 0;
  for (size_t i = in.find('\n', start); i != std::string_view::npos; i = in.find('\n', i + 1)) {
    if (i + 1 < in.size() && in[i + 1] == '\n') return i + 2;
    if (i + 2 < in.size() && in[i + 1] == '\r' && in[i + 2] == '\n') return i + 3;
  }
  return 0;
}

absl::StatusOr<RequestHead> ParseRequestHead(std::string_view head) {
  const std::vector<std::string_view> lines = HeadLines(head);
  if (lines.empty()) return absl::InvalidArgumentError("no request line");
  // METHOD SP TARGET SP VERSION
  const std::string_view request_line = lines[0];
  const size_t sp1 = request_line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : request_line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || request_line.find(' ', sp2 + 1) != std::string_view::npos) {
    return absl::InvalidArgumentError("the request line is not METHOD TARGET HTTP/VERSION");
  }
  RequestHead out;
  out.method = request_line.substr(0, sp1);
  out.target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = request_line.substr(sp2 + 1);
  if (!IsToken(out.method)) return absl::InvalidArgumentError("bad method");
  if (out.target.empty() || out.target[0] != '/' ||
      std::any_of(out.target.begin(), out.target.end(), [](char c) { return c <= ' ' || c == '\x7f'; })) {
    return absl::InvalidArgumentError("the target must be a path");
  }
  out.http11 = version == "HTTP/1.1";
  if (!out.http11 && version != "HTTP/1.0") {
    if (version.size() == 8 && version.substr(0, 5) == "HTTP/" && IsAsciiDigit(version[5]) && version[6] == '.' &&
        IsAsciiDigit(version[7])) {
      return absl::UnimplementedError("only HTTP/1.0 and HTTP/1.1 are served");
    }
    return absl::InvalidArgumentError("bad HTTP version");
  }
  int hosts = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) {
      return absl::InvalidArgumentError("a header line is not NAME: VALUE");
    }
    const std::string_view value = line.substr(colon + 1);
    if (std::any_of(value.begin(), value.end(), [](char c) { return c == '\0' || c == '\r'; })) {
      return absl::InvalidArgumentError("a control character in a header value");
    }
    if (IsHost(line.substr(0, colon))) ++hosts;
  }
  if (out.http11 && hosts != 1) return absl::InvalidArgumentError("an HTTP/1.1 request needs exactly one Host header");
  out.path = out.target.substr(0, out.target.find('?'));
  return out;
}

}  // namespace jitd::metrics
