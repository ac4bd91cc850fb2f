// Reading and writing kernel locks, strictly: a lock is what a deployment
// trusts to say which cubins may be served, so a typo (an unknown key, a
// truncated key hex, an instantiation twice) must stop the daemon at start
// rather than silently serve something else.
#include "manifest/lock.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <tuple>

#include "jitd/base/files.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"

namespace jitd::manifest {
namespace {

using text::Cat;

constexpr int64_t kSchema = 1;

absl::Status Bad(const std::string& origin, const toml::source_region& where, const std::string& what) {
  return absl::InvalidArgumentError(Cat(origin, ":", where.begin.line, ": ", what));
}

absl::Status CheckKeys(const toml::table& t, const std::set<std::string>& allowed, const std::string& origin,
                       const std::string& context) {
  for (const auto& [k, v] : t) {
    if (!allowed.count(std::string(k.str()))) {
      return Bad(origin, v.source(), Cat("unknown key '", k.str(), "' in ", context));
    }
  }
  return absl::OkStatus();
}

// The string at `key`: "" when absent and not required.
absl::StatusOr<std::string> String(const toml::table& t, const char* key, const std::string& origin,
                                   const std::string& context, bool required) {
  const toml::node* n = t.get(key);
  if (n == nullptr) {
    if (required) return Bad(origin, t.source(), Cat(context, " needs '", key, "'"));
    return std::string();
  }
  if (!n->is_string()) return Bad(origin, n->source(), Cat("'", key, "' in ", context, " must be a string"));
  return std::string(*n->value<std::string_view>());
}

bool IsKeyHex(std::string_view key) {
  return key.size() == 64 &&
         std::all_of(key.begin(), key.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

auto Order(const LockEntry& e) { return std::tie(e.kernel, e.params, e.arch); }

absl::StatusOr<LockEntry> ParseEntry(const toml::node& node, const std::string& origin) {
  const toml::table* t = node.as_table();
  if (t == nullptr) return Bad(origin, node.source(), "'instantiation' must be [[instantiation]] tables");
  const std::string context = "[[instantiation]]";
  JITD_RETURN_IF_ERROR(CheckKeys(*t, {"kernel", "params", "arch", "key"}, origin, context));
  LockEntry e;
  JITD_ASSIGN_OR_RETURN(e.kernel, String(*t, "kernel", origin, context, true));
  // A kernel without params has the empty canonical string: required, may be "".
  JITD_ASSIGN_OR_RETURN(e.params, String(*t, "params", origin, context, true));
  JITD_ASSIGN_OR_RETURN(e.arch, String(*t, "arch", origin, context, true));
  JITD_ASSIGN_OR_RETURN(e.key, String(*t, "key", origin, context, true));
  if (e.kernel.empty()) return Bad(origin, t->source(), Cat(context, ": 'kernel' is empty"));
  if (e.arch.empty()) return Bad(origin, t->source(), Cat(context, ": 'arch' is empty"));
  if (!IsKeyHex(e.key)) {
    return Bad(origin, t->get("key")->source(),
               Cat(context, " ", e.kernel, ": 'key' must be 64 lowercase hex digits (a content key)"));
  }
  return e;
}

absl::Status ParseEntries(const toml::table& root, const std::string& origin, KernelLock& lock) {
  const toml::node* list = root.get("instantiation");
  if (list == nullptr) return absl::OkStatus();  // an empty lock serves nothing, deliberately
  const toml::array* a = list->as_array();
  if (a == nullptr) return Bad(origin, list->source(), "'instantiation' must be [[instantiation]] tables");
  std::vector<std::pair<LockEntry, int>> lines;
  for (const toml::node& node : *a) {
    JITD_ASSIGN_OR_RETURN(LockEntry e, ParseEntry(node, origin));
    lines.emplace_back(std::move(e), static_cast<int>(node.source().begin.line));
  }
  std::stable_sort(lines.begin(), lines.end(),
                   [](const auto& x, const auto& y) { return Order(x.first) < Order(y.first); });
  for (size_t i = 1; i < lines.size(); ++i) {
    if (Order(lines[i - 1].first) == Order(lines[i].first)) {
      const LockEntry& e = lines[i].first;
      const int line = std::max(lines[i - 1].second, lines[i].second);
      return absl::InvalidArgumentError(Cat(origin, ":", line, ": ", text::Instantiation(e.kernel, e.params, e.arch),
                                            " is listed twice (first at line ",
                                            std::min(lines[i - 1].second, lines[i].second), ")"));
    }
  }
  for (auto& [e, line] : lines) lock.entries.push_back(std::move(e));
  return absl::OkStatus();
}

// A TOML basic string: quotes, backslashes and control characters escaped,
// everything else (UTF-8 included) as is.
std::string Quoted(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

absl::StatusOr<KernelLock> KernelLock::Parse(std::string_view toml, const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(toml, origin);
  } catch (const toml::parse_error& e) {
    return absl::InvalidArgumentError(Cat(origin, ":", e.source().begin.line, ": ", std::string(e.description())));
  }
  const std::string context = "the lock";
  JITD_RETURN_IF_ERROR(CheckKeys(
      root, {"schema", "tree", "namespace", "nvrtc_version", "tree_fingerprint", "instantiation"}, origin, context));
  const toml::node* schema = root.get("schema");
  if (schema == nullptr) return absl::InvalidArgumentError(Cat(origin, ":1: the lock needs 'schema = 1'"));
  if (!schema->is_integer() || *schema->value<int64_t>() != kSchema) {
    return Bad(origin, schema->source(), "schema must be 1 (the only lock schema this jitd reads)");
  }
  KernelLock lock;
  lock.origin = origin;
  JITD_ASSIGN_OR_RETURN(lock.tree, String(root, "tree", origin, context, false));
  JITD_ASSIGN_OR_RETURN(lock.kernel_namespace, String(root, "namespace", origin, context, false));
  JITD_ASSIGN_OR_RETURN(lock.nvrtc_version, String(root, "nvrtc_version", origin, context, false));
  JITD_ASSIGN_OR_RETURN(lock.tree_fingerprint, String(root, "tree_fingerprint", origin, context, false));
  JITD_RETURN_IF_ERROR(ParseEntries(root, origin, lock));
  return lock;
}

absl::StatusOr<KernelLock> KernelLock::Read(const std::filesystem::path& file) {
  JITD_ASSIGN_OR_RETURN(std::string text, files::ReadWholeFile(file));
  return Parse(text, file.string());
}

std::string KernelLock::ToToml() const {
  std::string out =
      "# Written by `jitd lint --write-lock`: every instantiation x arch the lint compiled cleanly, with its\n"
      "# content key. `jitd --lock FILE` serves exactly these (and `jitd warm --lock FILE` warms them);\n"
      "# lint and lock again to change the set. The informational keys are not checked.\n";
  out += Cat("schema = ", kSchema, "\n");
  out += Cat("tree = ", Quoted(tree), "\n");
  out += Cat("namespace = ", Quoted(kernel_namespace), "\n");
  out += Cat("nvrtc_version = ", Quoted(nvrtc_version), "\n");
  out += Cat("tree_fingerprint = ", Quoted(tree_fingerprint), "\n");
  for (const LockEntry& e : entries) {
    out += Cat("\n[[instantiation]]\nkernel = ", Quoted(e.kernel), "\nparams = ", Quoted(e.params),
               "\narch = ", Quoted(e.arch), "\nkey = ", Quoted(e.key), "\n");
  }
  return out;
}

const LockEntry* KernelLock::Find(std::string_view kernel, std::string_view params, std::string_view arch) const {
  const auto wanted = std::tie(kernel, params, arch);
  auto it = std::lower_bound(entries.begin(), entries.end(), wanted, [](const LockEntry& e, const auto& w) {
    return std::tuple<std::string_view, std::string_view, std::string_view>(e.kernel, e.params, e.arch) < w;
  });
  if (it == entries.end() || it->kernel != kernel || it->params != params || it->arch != arch) return nullptr;
  return &*it;
}

}  // namespace jitd::manifest
