// Parsing kernels.toml, strictly: an unknown key or a wrong type is an error
// naming the line, because a typo in the manifest otherwise surfaces as a
// kernel that silently compiles with the wrong options.
#include "manifest/manifest.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "manifest/signature.h"

namespace jitd::manifest {
namespace {

using text::Cat;
using text::Join;

// `s` as a message may quote it: a byte outside printable ASCII but UTF-8
// text's (a control character: C0, DEL, C1) as \xNN, so that no message
// about a manifest carries a newline or an escape sequence from it.
std::string Shown(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    const bool c1 = b == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) <= 0x9F &&
                    static_cast<unsigned char>(s[i + 1]) >= 0x80;
    if (b >= 0x20 && b != 0x7F && !c1) {
      out.push_back(s[i]);
      continue;
    }
    const std::string_view hex = "0123456789abcdef";
    for (size_t k = 0; k < (c1 ? 2u : 1u); ++k) {
      const auto v = static_cast<unsigned char>(s[i + k]);
      text::Append(out, "\\x", hex[v >> 4], hex[v & 0xF]);
    }
    i += c1 ? 1 : 0;
  }
  return out;
}

absl::Status Bad(const std::string& origin, const toml::source_region& where, const std::string& what) {
  return absl::InvalidArgumentError(Cat(origin, ":", where.begin.line, ": ", Shown(what)));
}

// Kernel names, parameter names and request values are what every message,
// log and progress line and `jitd lint`'s reports print, and what keys
// and requests spell: 1 to 128 of [A-Za-z0-9_.-], the first a letter, digit
// or '_' (docs/KERNEL-AUTHORS.md documents it). No newline, no escape
// sequence, no '/' (a tree's name qualifies a kernel's), no ',' or '='
// (canonical params are "k=v,k=v").
absl::Status CheckName(const std::string& origin, const toml::node& where, const std::string& what,
                       std::string_view name) {
  const bool ok = !name.empty() && name.size() <= 128 && name.front() != '.' && name.front() != '-' &&
                  std::all_of(name.begin(), name.end(), [](char c) {
                    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
                  });
  if (ok) return absl::OkStatus();
  return Bad(origin, where.source(),
             Cat(what, " '", name.substr(0, 128), "' is not a name: 1 to 128 letters, digits, '_', '.' or '-', ",
                 "starting with a letter, digit or '_'"));
}

// Every other string of the manifest (a description, a C++ spelling, an
// option) is text: no control character (C0 but none, DEL, C1), which
// would reach terminals and logs as it is.
absl::Status CheckText(const std::string& origin, const toml::node& where, const std::string& what,
                       std::string_view text) {
  if (Shown(text) == text) return absl::OkStatus();
  return Bad(origin, where.source(), Cat(what, " holds a control character: '", text.substr(0, 128), "'"));
}

absl::Status CheckKeys(const toml::table& t, const std::set<std::string>& allowed, const std::string& origin,
                       const std::string& context) {
  for (const auto& [k, v] : t) {
    std::string key(k.str());
    if (!allowed.count(key)) {
      return Bad(origin, v.source(),
                 Cat("unknown key '", key, "' in ", context, " (allowed: ", Join(allowed, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> String(const toml::table& t, const char* key, const std::string& origin,
                                   const std::string& context, bool required) {
  const toml::node* n = t.get(key);
  if (!n) {
    if (required) return Bad(origin, t.source(), Cat(context, " needs '", key, "'"));
    return std::string();
  }
  if (!n->is_string()) return Bad(origin, n->source(), Cat("'", key, "' in ", context, " must be a string"));
  JITD_RETURN_IF_ERROR(CheckText(origin, *n, Cat("'", key, "' in ", context), *n->value<std::string_view>()));
  return std::string(*n->value<std::string_view>());
}

absl::StatusOr<std::vector<std::string>> Strings(const toml::table& t, const char* key, const std::string& origin,
                                                 const std::string& context) {
  std::vector<std::string> out;
  const toml::node* n = t.get(key);
  if (!n) return out;
  const toml::array* a = n->as_array();
  if (!a) return Bad(origin, n->source(), Cat("'", key, "' in ", context, " must be an array of strings"));
  for (const auto& e : *a) {
    if (!e.is_string()) return Bad(origin, e.source(), Cat("'", key, "' in ", context, " must hold only strings"));
    JITD_RETURN_IF_ERROR(CheckText(origin, e, Cat("'", key, "' in ", context), *e.value<std::string_view>()));
    out.emplace_back(*e.value<std::string_view>());
  }
  return out;
}

// An option that makes NVRTC read a file would compile bytes no key
// covers (request_options.cpp, FileOptionProblem).
absl::Status CheckFileOptions(const toml::table& t, const std::string& origin, const std::string& context) {
  const toml::array* a = t.get_as<toml::array>("options");
  for (size_t i = 0; a != nullptr && i < a->size(); ++i) {
    const std::string_view option = (*a)[i].value_or(std::string_view());
    const std::string_view next = i + 1 < a->size() ? (*a)[i + 1].value_or(std::string_view()) : std::string_view();
    if (std::string why = FileOptionProblem(option, next); !why.empty()) {
      return Bad(origin, (*a)[i].source(), Cat("option '", option, "' in ", context, " is not allowed: ", why));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ParamDef> ParseParam(const toml::table& t, const std::string& origin, const std::string& kernel) {
  std::string context = Cat("a parameter of kernel ", kernel);
  JITD_RETURN_IF_ERROR(CheckKeys(t, {"name", "type", "values", "default"}, origin, context));
  ParamDef p;
  JITD_ASSIGN_OR_RETURN(auto name, String(t, "name", origin, context, true));
  JITD_RETURN_IF_ERROR(CheckName(origin, *t.get("name"), Cat("parameter name of kernel ", kernel), name));
  p.name = name;
  context = Cat("parameter '", p.name, "' of kernel ", kernel);
  JITD_ASSIGN_OR_RETURN(auto type, String(t, "type", origin, context, true));
  p.type = type;
  if (p.type != "dtype" && p.type != "enum" && p.type != "int") {
    return Bad(origin, t.source(), Cat(context, ": type must be dtype, enum or int, not '", p.type, "'"));
  }
  const toml::table* values = t.get_as<toml::table>("values");
  if (!values || values->empty()) return Bad(origin, t.source(), Cat(context, " needs a non-empty 'values' table"));
  for (const auto& [k, v] : *values) {
    if (!v.is_string()) return Bad(origin, v.source(), Cat(context, ": value '", k.str(), "' must map to a string"));
    std::string request_value(k.str());
    JITD_RETURN_IF_ERROR(CheckName(origin, v, Cat(context, ": value"), request_value));
    JITD_RETURN_IF_ERROR(
        CheckText(origin, v, Cat(context, ": value '", request_value, "'"), *v.value<std::string_view>()));
    if (p.type == "int" && (request_value.empty() || !std::all_of(request_value.begin(), request_value.end(),
                                                                  [](char c) { return c >= '0' && c <= '9'; }))) {
      return Bad(origin, v.source(), Cat(context, ": '", request_value, "' is not a decimal integer"));
    }
    if (p.type == "int" && request_value.size() > 9) {  // found by tests/fuzz (std::stoll threw)
      return Bad(origin, v.source(), Cat(context, ": '", request_value.substr(0, 24), "' has more than 9 digits"));
    }
    p.values.emplace_back(request_value, std::string(*v.value<std::string_view>()));
  }
  if (p.type == "int") {
    // toml++ iterates a table in key order ("1024" < "128"); list numbers
    // in numeric order, as people read them.
    std::sort(p.values.begin(), p.values.end(),
              [](const auto& a, const auto& b) { return std::stoll(a.first) < std::stoll(b.first); });
  }
  JITD_ASSIGN_OR_RETURN(auto def, String(t, "default", origin, context, false));
  if (t.get("default")) {
    bool known = std::any_of(p.values.begin(), p.values.end(), [&](const auto& v) { return v.first == def; });
    if (!known) return Bad(origin, t.source(), Cat(context, ": default '", def, "' is not one of its values"));
    p.default_value = def;
  }
  return p;
}

// `signature` (one argument list for every entry point) or `signatures`
// (one per name expression, as written in name_expressions), each one
// readable by DeclaredArgs, into `k`.
absl::Status ParseSignatures(const toml::table& t, const std::string& origin, const std::string& context,
                             KernelDef& k) {
  JITD_ASSIGN_OR_RETURN(auto signature, String(t, "signature", origin, context, false));
  k.signature = signature;
  if (!k.signature.empty()) {
    if (auto args = DeclaredArgs(k.signature); !args.ok()) {
      return Bad(origin, t.get("signature")->source(), Cat(context, ": ", args.status().message()));
    }
  }
  const toml::node* node = t.get("signatures");
  if (node == nullptr) return absl::OkStatus();
  const toml::table* table = node->as_table();
  if (table == nullptr) {
    return Bad(origin, node->source(),
               Cat(context, ": 'signatures' must be a table of name expression = \"(argument list)\""));
  }
  if (t.get("signature") != nullptr) {
    return Bad(origin, node->source(),
               Cat(context,
                   ": give 'signature' (one for every entry point) or 'signatures' (one per entry "
                   "point), not both"));
  }
  k.entry_signatures.assign(k.name_expressions.size(), "");
  for (const auto& [key, value] : *table) {
    const auto at = std::find(k.name_expressions.begin(), k.name_expressions.end(), key.str());
    if (at == k.name_expressions.end()) {
      return Bad(origin, value.source(),
                 Cat(context, ": 'signatures' names '", key.str(), "', which is not one of its name_expressions"));
    }
    const std::optional<std::string_view> text = value.value<std::string_view>();
    if (!text.has_value()) {
      return Bad(origin, value.source(), Cat(context, ": the signature of '", key.str(), "' must be a string"));
    }
    if (auto args = DeclaredArgs(*text); !args.ok()) {
      return Bad(origin, value.source(), Cat(context, ": ", key.str(), ": ", args.status().message()));
    }
    k.entry_signatures[static_cast<size_t>(at - k.name_expressions.begin())] = std::string(*text);
  }
  for (size_t e = 0; e < k.name_expressions.size(); ++e) {
    if (k.entry_signatures[e].empty()) {
      return Bad(origin, node->source(),
                 Cat(context, ": 'signatures' gives no argument list for '", k.name_expressions[e],
                     "' (one for each name expression)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<KernelDef> ParseKernel(const toml::table& t, const std::string& origin) {
  JITD_RETURN_IF_ERROR(CheckKeys(t,
                                 {"name", "source", "description", "name_expressions", "options", "params", "pch",
                                  "signature", "signatures", "launch"},
                                 origin, "a [[kernel]]"));
  KernelDef k;
  k.line = static_cast<int>(t.source().begin.line);
  JITD_ASSIGN_OR_RETURN(auto name, String(t, "name", origin, "a [[kernel]]", true));
  JITD_RETURN_IF_ERROR(CheckName(origin, *t.get("name"), "kernel name", name));
  k.name = name;
  std::string context = Cat("kernel ", k.name);
  JITD_ASSIGN_OR_RETURN(auto source, String(t, "source", origin, context, true));
  k.source = source;
  if (k.source.empty() || k.source.front() == '/' || k.source.find("..") != std::string::npos) {
    return Bad(origin, t.source(), Cat(context, ": source must be a path inside the kernels directory"));
  }
  JITD_ASSIGN_OR_RETURN(auto description, String(t, "description", origin, context, false));
  k.description = description;
  JITD_ASSIGN_OR_RETURN(auto launch, String(t, "launch", origin, context, false));
  k.launch = launch;
  JITD_ASSIGN_OR_RETURN(auto exprs, Strings(t, "name_expressions", origin, context));
  k.name_expressions = exprs;
  if (k.name_expressions.empty()) return Bad(origin, t.source(), Cat(context, " needs at least one name expression"));
  JITD_RETURN_IF_ERROR(ParseSignatures(t, origin, context, k));
  JITD_ASSIGN_OR_RETURN(auto options, Strings(t, "options", origin, context));
  JITD_RETURN_IF_ERROR(CheckFileOptions(t, origin, context));
  k.options = options;
  if (const toml::node* pch = t.get("pch")) {
    if (!pch->is_boolean()) return Bad(origin, pch->source(), Cat("'pch' in ", context, " must be true or false"));
    k.pch = *pch->value<bool>();
  }
  if (const toml::node* params = t.get("params")) {
    const toml::array* a = params->as_array();
    if (!a) return Bad(origin, params->source(), Cat("'params' of ", context, " must be [[kernel.params]] tables"));
    for (const auto& p : *a) {
      const toml::table* pt = p.as_table();
      if (!pt) return Bad(origin, p.source(), Cat("'params' of ", context, " must be [[kernel.params]] tables"));
      JITD_ASSIGN_OR_RETURN(auto param, ParseParam(*pt, origin, k.name));
      for (const auto& other : k.params) {
        if (other.name == param.name)
          return Bad(origin, p.source(), Cat(context, ": parameter '", param.name, "' twice"));
      }
      k.params.push_back(std::move(param));
    }
  }
  // Every {placeholder} must name a parameter, and every parameter must be
  // used: otherwise two requests would compile to the same program.
  std::set<std::string> used;
  for (const auto& e : k.name_expressions) {
    for (size_t open = e.find('{'); open != std::string::npos; open = e.find('{', open + 1)) {
      size_t close = e.find('}', open);
      if (close == std::string::npos) return Bad(origin, t.source(), Cat(context, ": unclosed '{' in '", e, "'"));
      std::string placeholder = e.substr(open + 1, close - open - 1);
      bool known =
          std::any_of(k.params.begin(), k.params.end(), [&](const ParamDef& p) { return p.name == placeholder; });
      if (!known)
        return Bad(origin, t.source(), Cat(context, ": '{", placeholder, "}' in '", e, "' is not a parameter"));
      used.insert(placeholder);
    }
  }
  for (const auto& p : k.params) {
    if (!used.count(p.name)) {
      return Bad(origin, t.source(), Cat(context, ": parameter '", p.name, "' is not used by any name expression"));
    }
  }
  return k;
}

// "a" or "a::b": identifiers joined by "::", none of them a reserved
// spelling (a leading digit, "__", or "_" then a capital).
bool IsQualifiedName(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  size_t start = 0;
  while (true) {
    size_t end = name.find("::", start);
    std::string_view part = name.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (part.empty() || std::isdigit(static_cast<unsigned char>(part.front())) ||
        part.find("__") != std::string_view::npos ||
        (part.size() > 1 && part[0] == '_' && std::isupper(static_cast<unsigned char>(part[1])))) {
      return false;
    }
    for (char c : part) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
    }
    if (end == std::string_view::npos) return true;
    start = end + 2;
  }
}

}  // namespace

std::string KernelDef::SignatureText() const {
  if (entry_signatures.empty()) return signature;
  std::string out;
  for (size_t e = 0; e < entry_signatures.size(); ++e) {
    text::Append(out, e == 0 ? "" : "; ", name_expressions[e], " ", entry_signatures[e]);
  }
  return out;
}

absl::StatusOr<Manifest> Manifest::Parse(std::string_view text, const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    return absl::InvalidArgumentError(Cat(origin, ":", e.source().begin.line, ": ", std::string(e.description())));
  }
  JITD_RETURN_IF_ERROR(CheckKeys(root, {"schema", "namespace", "defaults", "kernel"}, origin, "the manifest"));
  Manifest m;
  if (root.get("namespace")) {
    JITD_ASSIGN_OR_RETURN(auto ns, String(root, "namespace", origin, "the manifest", true));
    if (!IsQualifiedName(ns)) {
      return Bad(
          origin, root.get("namespace")->source(),
          Cat("namespace '", ns, "' is not a C++ namespace name (write it as in code: \"team\" or \"team::ops\")"));
    }
    m.kernel_namespace = ns;
  }
  if (const toml::node* schema = root.get("schema")) {
    if (!schema->is_integer() || *schema->value<int64_t>() != 1) {
      return Bad(origin, schema->source(), "schema must be 1 (the only manifest schema this jitd reads)");
    }
  }
  if (const toml::node* defaults = root.get("defaults")) {
    const toml::table* t = defaults->as_table();
    if (!t) return Bad(origin, defaults->source(), "[defaults] must be a table");
    JITD_RETURN_IF_ERROR(CheckKeys(*t, {"options"}, origin, "[defaults]"));
    JITD_ASSIGN_OR_RETURN(auto options, Strings(*t, "options", origin, "[defaults]"));
    JITD_RETURN_IF_ERROR(CheckFileOptions(*t, origin, "[defaults]"));
    m.default_options = options;
  }
  const toml::node* kernels = root.get("kernel");
  if (!kernels || !kernels->is_array_of_tables()) {
    return absl::InvalidArgumentError(Cat(origin, ": no [[kernel]] tables"));
  }
  for (const auto& node : *kernels->as_array()) {
    JITD_ASSIGN_OR_RETURN(auto k, ParseKernel(*node.as_table(), origin));
    if (m.Find(k.name)) return Bad(origin, node.source(), Cat("kernel ", k.name, " is listed twice"));
    m.kernels.push_back(std::move(k));
  }
  // Counted before anything lists them (kMaxInstantiationsPerTree says why),
  // each kernel's count a product of its params' value counts that
  // saturates instead of overflowing.
  constexpr uint64_t kOver = kMaxInstantiationsPerTree + 1;
  uint64_t total = 0;
  for (const KernelDef& k : m.kernels) {
    const uint64_t count = InstantiationCount(k);
    total = std::min(total + std::min(count, kOver), kOver);
    if (total < kOver) continue;
    std::vector<std::string> factors;
    for (const ParamDef& p : k.params) factors.push_back(Cat(p.values.size(), " ", p.name));
    const std::string own =
        Cat(count == UINT64_MAX ? "more than 2^64" : Cat(count), " instantiations (", Join(factors, " x "), ")");
    return absl::InvalidArgumentError(
        Cat(origin, ":", k.line, ": kernel ", k.name,
            count >= kOver ? Cat(" has ", own, ", more than the ") : Cat(" (", own, ") brings the tree over the "),
            kMaxInstantiationsPerTree,
            " instantiations a kernel tree may have (warm --all, lint and the compile-all guard list and compile "
            "each): list fewer values, or split the kernel's parameters over several kernels"));
  }
  return m;
}

uint64_t InstantiationCount(const KernelDef& kernel) {
  uint64_t count = 1;
  for (const ParamDef& p : kernel.params) {
    const uint64_t n = p.values.size();
    if (n != 0 && count > UINT64_MAX / n) return UINT64_MAX;
    count *= n;
  }
  return count;
}

const KernelDef* Manifest::Find(std::string_view name) const {
  for (const auto& k : kernels) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

std::vector<std::string> Manifest::CloseMatches(std::string_view name, size_t n) const {
  std::vector<std::string> names;
  for (const auto& k : kernels) names.push_back(k.name);
  return text::CloseMatches(name, names, n);
}

std::vector<std::map<std::string, std::string>> Manifest::Instantiations(const KernelDef& kernel) {
  std::vector<std::map<std::string, std::string>> out{{}};
  for (const auto& p : kernel.params) {
    std::vector<std::map<std::string, std::string>> next;
    for (const auto& partial : out) {
      for (const auto& [value, cpp] : p.values) {
        auto m = partial;
        m[p.name] = value;
        next.push_back(std::move(m));
      }
    }
    out = std::move(next);
  }
  return out;
}

}  // namespace jitd::manifest
