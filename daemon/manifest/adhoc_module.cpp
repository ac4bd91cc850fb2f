#include "manifest/adhoc_module.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "jitd/keys/content_key.h"
#include "manifest/manifest.h"
#include "manifest/module_kernel.h"
#include "manifest/toml_fields.h"

namespace jitd::manifest {
namespace {

using text::Cat;

bool ExpressionChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("_:<>,.&*+- ").find(c) != std::string::npos;
}

// A tree path as a request may name one: relative, no "..", no empty or
// "." part, printable.
std::string PathProblem(std::string_view path) {
  if (path.empty()) return "is empty";
  if (path.size() > kMaxAdhocPath) return Cat("is longer than ", kMaxAdhocPath, " characters");
  if (path.front() == '/') return "is absolute: name a path inside the kernel tree";
  if (!std::all_of(path.begin(), path.end(), [](char c) { return c > ' ' && c < 0x7f && c != '\\'; })) {
    return "holds a space, a control character, a backslash or a byte outside ASCII";
  }
  for (size_t start = 0; start <= path.size();) {
    const size_t end = std::min(path.find('/', start), path.size());
    const std::string_view part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return "has an empty, '.' or '..' part: name it as the tree does";
    start = end + 1;
  }
  return "";
}

absl::Status Refused(std::string_view name, const std::string& what) {
  return absl::InvalidArgumentError(Cat("ad-hoc module ", name, ": ", what));
}

absl::Status CheckPaths(std::string_view name, const std::vector<std::string>& paths, size_t most,
                        std::string_view field) {
  if (paths.size() > most)
    return Refused(name, Cat(paths.size(), " ", field, ", more than the ", most, " one may name"));
  for (const std::string& path : paths) {
    if (std::string why = PathProblem(path); !why.empty()) {
      return Refused(name, Cat(field, " entry '", Shown(path.substr(0, 128)), "' ", why));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckOptions(std::string_view name, const std::vector<std::string>& options) {
  if (options.size() > kMaxAdhocOptions) {
    return Refused(name, Cat(options.size(), " options, more than the ", kMaxAdhocOptions, " one may give"));
  }
  for (const std::string& option : options) {
    if (std::string why = ModuleOptionProblem(option); !why.empty()) {
      return Refused(name, Cat("option '", Shown(option.substr(0, 128)), "' is not allowed: ", why));
    }
    // A macro's value reaches the tree's code: the expression rule keeps
    // quotes and parentheses out of it too.
    const size_t equals = option.find('=');
    if (option.starts_with("-D") && equals != std::string::npos) {
      const std::string_view value = std::string_view(option).substr(equals + 1);
      if (!value.empty()) {
        if (std::string why = AdhocExpressionProblem(value); !why.empty()) {
          return Refused(name, Cat("option '", Shown(option.substr(0, 128)), "': its value ", why));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string AdhocExpressionProblem(std::string_view expression) {
  if (expression.empty()) return "is empty";
  if (expression.size() > kMaxAdhocExpression) return Cat("is longer than ", kMaxAdhocExpression, " characters");
  const auto bad = std::find_if_not(expression.begin(), expression.end(), ExpressionChar);
  if (bad == expression.end()) return "";
  const unsigned char c = static_cast<unsigned char>(*bad);
  const std::string shown = c >= 0x20 && c < 0x7f ? Cat("'", std::string(1, *bad), "'") : Cat("byte ", int(c));
  return Cat("holds ", shown,
             ": an ad-hoc export is a name with template arguments (letters, digits, '_', ':', '<', '>', ',', '.', "
             "'&', '*', '+', '-', spaces); declare anything else as a module kernel in kernels.toml");
}

bool IsAdhocTreeFile(std::string_view path) {
  static constexpr std::string_view kSuffixes[] = {".cu", ".cuda", ".cuh", ".h",   ".hh",  ".hpp", ".hxx",
                                                   ".c",  ".cc",   ".cpp", ".cxx", ".inc", ".inl", ".ipp"};
  return std::any_of(std::begin(kSuffixes), std::end(kSuffixes),
                     [&](std::string_view suffix) { return path.ends_with(suffix); });
}

std::string AdhocFingerprint(const std::map<std::string, std::string>& files) {
  std::map<std::string, std::string> sources;
  for (const auto& [path, content] : files) {
    if (IsAdhocTreeFile(path)) sources.emplace(path, content);
  }
  return keys::TreeFingerprint(sources);
}

absl::StatusOr<KernelDef> AdhocKernelDef(std::string_view name, const AdhocModule& spec) {
  if (spec.sources.empty()) return Refused(name, "no sources: name the tree files its unit includes, in order");
  JITD_RETURN_IF_ERROR(CheckPaths(name, spec.sources, kMaxAdhocSources, "sources"));
  JITD_RETURN_IF_ERROR(CheckPaths(name, spec.include_dirs, kMaxAdhocIncludeDirs, "include_dirs"));
  if (spec.exports.empty()) return Refused(name, "no exports: name at least one (export name, C++ expression)");
  if (spec.exports.size() > kMaxAdhocExports) {
    return Refused(name, Cat(spec.exports.size(), " exports, more than the ", kMaxAdhocExports, " one may have"));
  }
  std::set<std::string> seen;
  for (const auto& [export_name, expression] : spec.exports) {
    if (!IsCIdentifier(export_name)) {
      return Refused(name, Cat("export name '", Shown(export_name.substr(0, 128)),
                               "' is not a C identifier (the shared object exports __tvm_ffi_<name>)"));
    }
    if (!seen.insert(export_name).second) return Refused(name, Cat("export ", export_name, " is named twice"));
    if (std::string why = AdhocExpressionProblem(expression); !why.empty()) {
      return Refused(name, Cat("export ", export_name, "'s expression ", why));
    }
  }
  JITD_RETURN_IF_ERROR(CheckOptions(name, spec.options));
  KernelDef def;
  def.name = std::string(name);
  def.kind = KernelKind::kModule;
  def.sources = spec.sources;
  def.source = spec.sources.front();
  def.include_dirs = spec.include_dirs;
  def.exports = spec.exports;
  def.options = spec.options;
  def.description = "ad-hoc module (load_jit)";
  return def;
}

}  // namespace jitd::manifest
