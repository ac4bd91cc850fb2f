// The allow-list of NVRTC options a request may add. Everything that could
// read a file, change where headers come from, or contradict what the
// manifest and the daemon decide is refused with the reason.
#include <algorithm>
#include <charconv>
#include <map>

#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "manifest/manifest.h"

namespace jitd::manifest {
namespace {

using text::Cat;

// Far longer than any legitimate option; a longer one is an attack or a bug.
constexpr size_t kMaxOptionLength = 160;
constexpr size_t kMaxOptions = 32;

// Spellings NVRTC accepts for the same flag, mapped to one, so that the same
// request spelled two ways has one key.
const std::map<std::string, std::string>& Flags() {
  static const std::map<std::string, std::string> kFlags = {
      {"-lineinfo", "--generate-line-info"},
      {"--generate-line-info", "--generate-line-info"},
      {"-use_fast_math", "--use_fast_math"},
      {"--use_fast_math", "--use_fast_math"},
      {"-G", "--device-debug"},
      {"--device-debug", "--device-debug"},
      {"-restrict", "--restrict"},
      {"--restrict", "--restrict"},
      {"-extra-device-vectorization", "--extra-device-vectorization"},
      {"--extra-device-vectorization", "--extra-device-vectorization"},
  };
  return kFlags;
}

// Boolean-valued options: spelling -> canonical name.
const std::map<std::string, std::string>& BoolOptions() {
  static const std::map<std::string, std::string> kBools = {
      {"-ftz", "--ftz"},
      {"--ftz", "--ftz"},
      {"-prec-div", "--prec-div"},
      {"--prec-div", "--prec-div"},
      {"-prec-sqrt", "--prec-sqrt"},
      {"--prec-sqrt", "--prec-sqrt"},
      {"-fmad", "--fmad"},
      {"--fmad", "--fmad"},
  };
  return kBools;
}

bool IsIdentifier(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  if (!(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

bool IsMacroValue(std::string_view s) {
  return s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '+' || c == '-';
         });
}

absl::Status Refuse(std::string_view option, std::string_view why) {
  return absl::InvalidArgumentError(Cat("option '", option, "' is not allowed: ", why));
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// One option, canonicalised, or why it is refused. `macros` collects
// NAME -> value to catch one macro defined two ways.
absl::StatusOr<std::string> Canonical(std::string_view o, std::map<std::string, std::string>& macros) {
  if (o.size() > kMaxOptionLength) return Refuse(o.substr(0, 40), Cat("longer than ", kMaxOptionLength, " characters"));
  if (o.empty()) return Refuse(o, "empty");
  for (std::string_view p : {"-I", "--include-path", "-include", "--pre-include", "-isystem"}) {
    if (StartsWith(o, p)) {
      return Refuse(o,
                    "include paths and forced includes come from the daemon's kernels directory, never from a request");
    }
  }
  for (std::string_view p : {"-arch", "--gpu-architecture", "-code"}) {
    if (StartsWith(o, p)) return Refuse(o, "set the architecture with the request's arch field");
  }
  for (std::string_view p : {"-std", "--std"}) {
    if (StartsWith(o, p)) return Refuse(o, "the C++ dialect is fixed by the kernel manifest");
  }
  for (std::string_view p : {"-pch", "--pch", "--create-pch", "--use-pch"}) {
    if (StartsWith(o, p)) return Refuse(o, "precompiled headers are managed by the daemon");
  }
  if (o.find('/') != std::string_view::npos || o.find('\\') != std::string_view::npos) {
    return Refuse(o, "file paths are never accepted in options");
  }
  if (auto it = Flags().find(std::string(o)); it != Flags().end()) return it->second;
  size_t eq = o.find('=');
  if (eq != std::string_view::npos) {
    std::string name(o.substr(0, eq));
    std::string_view value = o.substr(eq + 1);
    if (auto it = BoolOptions().find(name); it != BoolOptions().end()) {
      if (value != "true" && value != "false") return Refuse(o, "its value must be true or false");
      return Cat(it->second, "=", value);
    }
    if (name == "-maxrregcount" || name == "--maxrregcount") {
      int n = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || end != value.data() + value.size() || n < 16 || n > 255) {
        return Refuse(o, "--maxrregcount takes a register count from 16 to 255");
      }
      return Cat("--maxrregcount=", n);
    }
  }
  std::string_view macro;
  if (StartsWith(o, "--define-macro="))
    macro = o.substr(15);
  else if (StartsWith(o, "-D"))
    macro = o.substr(2);
  if (!macro.empty() || o == "-D") {
    size_t meq = macro.find('=');
    std::string_view name = macro.substr(0, meq);
    std::string_view value = meq == std::string_view::npos ? std::string_view() : macro.substr(meq + 1);
    if (!IsIdentifier(name)) return Refuse(o, "a macro name is a C identifier of at most 64 characters");
    if (!IsMacroValue(value)) {
      return Refuse(o, "a macro value may hold letters, digits and _ . + - (at most 64), no quotes or spaces");
    }
    std::string canonical = meq == std::string_view::npos ? Cat("-D", name) : Cat("-D", name, "=", value);
    auto [it, inserted] = macros.emplace(std::string(name), canonical);
    if (!inserted && it->second != canonical) {
      return absl::InvalidArgumentError(
          Cat("macro ", name, " is defined twice (", it->second, " and ", canonical, ")"));
    }
    return canonical;
  }
  return Refuse(o, Cat("it is not in the allow-list (", AllowedOptionsSummary(), ")"));
}

}  // namespace

std::string AllowedOptionsSummary() {
  return "-lineinfo, --use_fast_math, -G, --restrict, --extra-device-vectorization, --ftz=B, --prec-div=B, "
         "--prec-sqrt=B, --fmad=B, --maxrregcount=N, -DNAME[=VALUE]";
}

absl::StatusOr<std::vector<std::string>> CanonicalRequestOptions(const std::vector<std::string>& options) {
  if (options.size() > kMaxOptions) {
    return absl::InvalidArgumentError(Cat(options.size(), " options given; at most ", kMaxOptions, " are accepted"));
  }
  std::vector<std::string> out;
  std::map<std::string, std::string> macros;
  std::map<std::string, std::string> bools;
  for (const auto& o : options) {
    JITD_ASSIGN_OR_RETURN(auto c, Canonical(o, macros));
    if (size_t eq = c.find('='); eq != std::string::npos && c.substr(0, 2) == "--") {
      auto [it, inserted] = bools.emplace(c.substr(0, eq), c);
      if (!inserted && it->second != c) {
        return absl::InvalidArgumentError(Cat("options ", it->second, " and ", c, " contradict each other"));
      }
    }
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace jitd::manifest
