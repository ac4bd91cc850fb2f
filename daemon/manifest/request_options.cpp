// The allow-list of NVRTC options a request may add, and the options
// neither a request nor a manifest may give. Everything that could read a
// file, change where headers come from, or contradict what the manifest and
// the daemon decide is refused with the reason.
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

// Why NVRTC's file-reading options are refused, for requests and manifests
// alike: a compile is given the tree's bytes (the ones its key hashes) and
// NVRTC's own -I paths to the toolkit (whose fingerprint is in the key);
// a file read from anywhere else would change the cubin under the same key.
constexpr char kTreeBytesOnly[] =
    "a compile reads only the kernel tree's bytes, which are in its key; put the headers in the tree";

// Options that make NVRTC (or the ptxas inside it) read or write a file.
// Checked by prefix, so that every spelling is caught: -I/x, -I /x,
// -I=/x, "-I" then "/x", --include-path=/x, --include-path then /x.
struct FileOption {
  std::string_view prefix;
  std::string_view what;
};
constexpr FileOption kFileOptions[] = {
    {"-I", "include paths and forced includes come from the daemon's kernel tree, never from a request or a manifest"},
    {"--include-path",
     "include paths and forced includes come from the daemon's kernel tree, never from a request or a manifest"},
    {"-isystem", "include paths come from the daemon's kernel tree, never from a request or a manifest"},
    {"--system-include", "include paths come from the daemon's kernel tree, never from a request or a manifest"},
    {"-include",
     "include paths and forced includes come from the daemon's kernel tree, never from a request or a manifest"},
    {"--pre-include",
     "include paths and forced includes come from the daemon's kernel tree, never from a request or a manifest"},
    // -pch and --pch cover -pch-dir, --pch-dir, --pch-verbose, --pch-messages.
    {"-pch", "precompiled headers are the daemon's (set pch = true in the kernel's table)"},
    {"--pch", "precompiled headers are the daemon's (set pch = true in the kernel's table)"},
    {"-create-pch", "precompiled headers are the daemon's (set pch = true in the kernel's table)"},
    {"--create-pch", "precompiled headers are the daemon's (set pch = true in the kernel's table)"},
    {"-use-pch", "precompiled headers are the daemon's (set pch = true in the kernel's table)"},
    {"--use-pch", "precompiled headers are the daemon's (set pch = true in the kernel's table)"},
    {"-instantiate-templates-in-pch", "precompiled headers are the daemon's (set pch = true in the kernel's table)"},
    {"--instantiate-templates-in-pch", "precompiled headers are the daemon's (set pch = true in the kernel's table)"},
    {"-time", "it writes a file on the daemon's machine"},
    {"--time", "it writes a file on the daemon's machine"},
    {"-fdevice-time-trace", "it writes a file on the daemon's machine"},
    {"--fdevice-time-trace", "it writes a file on the daemon's machine"},
    {"-optf", "it reads options from a file"},
    {"--options-file", "it reads options from a file"},
};

// Whether ptxas options (the value of -Xptxas / --ptxas-options) name a
// file: ptxas's --options-file (-optf) reads one, --output-file (-o)
// writes one.
bool PtxasNamesFile(std::string_view value) {
  size_t start = 0;
  while (start <= value.size()) {
    size_t end = value.find_first_of(" ,=", start);
    if (end == std::string_view::npos) end = value.size();
    const std::string_view token = value.substr(start, end - start);
    if (token == "-o" || token == "--output-file" || token == "-optf" || token == "--options-file") return true;
    start = end + 1;
  }
  return false;
}

// One option, canonicalised, or why it is refused. `macros` collects
// NAME -> value to catch one macro defined two ways.
absl::StatusOr<std::string> Canonical(std::string_view o, std::map<std::string, std::string>& macros) {
  if (o.size() > kMaxOptionLength) return Refuse(o.substr(0, 40), Cat("longer than ", kMaxOptionLength, " characters"));
  if (o.empty()) return Refuse(o, "empty");
  if (std::string why = FileOptionProblem(o, ""); !why.empty()) return Refuse(o, why);
  for (std::string_view p : {"-arch", "--gpu-architecture", "-code"}) {
    if (StartsWith(o, p)) return Refuse(o, "set the architecture with the request's arch field");
  }
  for (std::string_view p : {"-std", "--std"}) {
    if (StartsWith(o, p)) return Refuse(o, "the C++ dialect is fixed by the kernel manifest");
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

std::string FileOptionProblem(std::string_view option, std::string_view next) {
  for (const FileOption& f : kFileOptions) {
    if (StartsWith(option, f.prefix)) return Cat(f.what, ": ", kTreeBytesOnly);
  }
  for (std::string_view p : {"-Xptxas", "--ptxas-options"}) {
    if (!StartsWith(option, p)) continue;
    std::string_view value = option.substr(p.size());
    if (!value.empty() && (value.front() == '=' || value.front() == ' ')) value.remove_prefix(1);
    if (PtxasNamesFile(value.empty() ? next : value)) {
      return Cat("ptxas's --options-file and --output-file read and write files on the daemon's machine: ",
                 kTreeBytesOnly);
    }
  }
  return "";
}

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
