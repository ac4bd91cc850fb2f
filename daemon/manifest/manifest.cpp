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
#include "manifest/module_kernel.h"
#include "manifest/signature.h"
#include "manifest/toml_fields.h"

namespace jitd::manifest {
namespace {

using text::Cat;
using text::Join;

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
  // A module's signature documents its exports' arguments (tensors, in the
  // launcher's words); an NVRTC kernel's is checked against what compiles.
  if (!k.signature.empty() && !k.is_module()) {
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

bool InsideTree(std::string_view path) {
  return !path.empty() && path.front() != '/' && path.find("..") == std::string_view::npos;
}

// Options of a module kernel (or of [defaults] in a tree with modules):
// nvcc's allow-list (ModuleOptionProblem).
absl::Status CheckModuleOptions(const toml::table& t, const std::string& origin, const std::string& context) {
  const toml::array* a = t.get_as<toml::array>("options");
  for (size_t i = 0; a != nullptr && i < a->size(); ++i) {
    const std::string_view option = (*a)[i].value_or(std::string_view());
    if (std::string why = ModuleOptionProblem(option); !why.empty()) {
      return Bad(origin, (*a)[i].source(), Cat("option '", option, "' in ", context, " is not allowed: ", why));
    }
  }
  return absl::OkStatus();
}

// kind = "module": the sources, include directories and exports that take
// the place of `source` and `name_expressions` (module_kernel.h).
absl::Status ParseModuleFields(const toml::table& t, const std::string& origin, const std::string& context,
                               KernelDef& k) {
  for (const char* nvrtc_only : {"source", "name_expressions", "pch", "signatures", "launch"}) {
    if (const toml::node* n = t.get(nvrtc_only)) {
      return Bad(origin, n->source(),
                 Cat(context, ": '", nvrtc_only,
                     "' is for NVRTC kernels; a module lists `sources` and `exports` (docs/KERNEL-AUTHORS.md, "
                     "\"Module trees\")"));
    }
  }
  JITD_ASSIGN_OR_RETURN(k.sources, Strings(t, "sources", origin, context));
  if (k.sources.empty()) {
    return Bad(origin, t.source(), Cat(context, ": a module needs `sources`, the files its unit includes, in order"));
  }
  JITD_ASSIGN_OR_RETURN(k.include_dirs, Strings(t, "include_dirs", origin, context));
  for (const auto& list : {&k.sources, &k.include_dirs}) {
    for (const std::string& path : *list) {
      if (!InsideTree(path)) {
        return Bad(origin, t.source(),
                   Cat(context, ": '", path, "' must be a path inside the kernels directory (relative, no '..')"));
      }
    }
  }
  k.source = k.sources.front();
  const toml::node* node = t.get("exports");
  const toml::table* exports = node != nullptr ? node->as_table() : nullptr;
  if (exports == nullptr || exports->empty()) {
    return Bad(origin, node != nullptr ? node->source() : t.source(),
               Cat(context, ": a module needs `exports`, a table of export name = \"C++ expression\""));
  }
  for (const auto& [key, value] : *exports) {
    const std::string export_name(key.str());
    if (!IsCIdentifier(export_name)) {
      return Bad(origin, value.source(),
                 Cat(context, ": export name '", export_name,
                     "' is not a C identifier (the shared object exports __tvm_ffi_<name>)"));
    }
    const std::optional<std::string_view> expression = value.value<std::string_view>();
    if (!expression.has_value() || expression->empty()) {
      return Bad(origin, value.source(), Cat(context, ": export '", export_name, "' must be a C++ expression string"));
    }
    JITD_RETURN_IF_ERROR(CheckText(origin, value, Cat(context, ": export '", export_name, "'"), *expression));
    k.exports.emplace_back(export_name, std::string(*expression));
  }
  return CheckModuleOptions(t, origin, context);
}

// Every {placeholder} must name a parameter, and every parameter must be
// used: otherwise two requests would compile to the same program.
absl::Status CheckPlaceholders(const toml::table& t, const std::string& origin, const std::string& context,
                               const KernelDef& k) {
  std::set<std::string> used;
  std::vector<std::string> templates = k.name_expressions;
  for (const auto& [export_name, expression] : k.exports) templates.push_back(expression);
  for (const auto& e : templates) {
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
      return Bad(origin, t.source(),
                 Cat(context, ": parameter '", p.name, "' is not used by any ",
                     k.is_module() ? "export expression" : "name expression"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<KernelDef> ParseKernel(const toml::table& t, const std::string& origin) {
  JITD_RETURN_IF_ERROR(CheckKeys(t,
                                 {"name", "kind", "source", "sources", "include_dirs", "exports", "description",
                                  "name_expressions", "options", "params", "pch", "signature", "signatures", "launch"},
                                 origin, "a [[kernel]]"));
  KernelDef k;
  k.line = static_cast<int>(t.source().begin.line);
  JITD_ASSIGN_OR_RETURN(auto name, String(t, "name", origin, "a [[kernel]]", true));
  JITD_RETURN_IF_ERROR(CheckName(origin, *t.get("name"), "kernel name", name));
  k.name = name;
  std::string context = Cat("kernel ", k.name);
  JITD_ASSIGN_OR_RETURN(auto kind, String(t, "kind", origin, context, false));
  if (kind == "module") {
    k.kind = KernelKind::kModule;
  } else if (!kind.empty() && kind != "nvrtc") {
    return Bad(origin, t.get("kind")->source(),
               Cat(context,
                   ": kind must be \"nvrtc\" (device code, the default) or \"module\" (host+device, "
                   "built by nvcc), not '",
                   kind, "'"));
  }
  if (k.is_module()) {
    JITD_RETURN_IF_ERROR(ParseModuleFields(t, origin, context, k));
  } else {
    for (const char* module_only : {"sources", "include_dirs", "exports"}) {
      if (const toml::node* n = t.get(module_only)) {
        return Bad(origin, n->source(), Cat(context, ": '", module_only, "' is for kind = \"module\""));
      }
    }
    JITD_ASSIGN_OR_RETURN(auto source, String(t, "source", origin, context, true));
    k.source = source;
    if (!InsideTree(k.source)) {
      return Bad(origin, t.source(), Cat(context, ": source must be a path inside the kernels directory"));
    }
  }
  JITD_ASSIGN_OR_RETURN(auto description, String(t, "description", origin, context, false));
  k.description = description;
  JITD_ASSIGN_OR_RETURN(auto launch, String(t, "launch", origin, context, false));
  k.launch = launch;
  JITD_ASSIGN_OR_RETURN(auto exprs, Strings(t, "name_expressions", origin, context));
  k.name_expressions = exprs;
  if (k.name_expressions.empty() && !k.is_module()) {
    return Bad(origin, t.source(), Cat(context, " needs at least one name expression"));
  }
  JITD_RETURN_IF_ERROR(ParseSignatures(t, origin, context, k));
  JITD_ASSIGN_OR_RETURN(auto options, Strings(t, "options", origin, context));
  if (!k.is_module()) JITD_RETURN_IF_ERROR(CheckFileOptions(t, origin, context));
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
  JITD_RETURN_IF_ERROR(CheckPlaceholders(t, origin, context, k));
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

std::string UndeclaredNamespaceNote(const Manifest& manifest) {
  if (manifest.namespace_declared) return "";
  return Cat("kernels.toml sets no `namespace`, so the rule is the default, ", manifest.kernel_namespace,
             "; for kernels in another, add `namespace = \"acme\"` (yours) at the top of kernels.toml");
}

namespace {

// The manifest's top-level keys besides [defaults] and [[kernel]]:
// namespace, schema and adhoc_modules.
absl::Status ParseTopLevel(const toml::table& root, const std::string& origin, Manifest& m) {
  if (const toml::node* adhoc = root.get("adhoc_modules")) {
    if (!adhoc->is_boolean()) {
      return Bad(origin, adhoc->source(),
                 "adhoc_modules must be true or false (true: clients may send load_jit module specs over this "
                 "tree's files)");
    }
    m.adhoc_modules = *adhoc->value<bool>();
  }
  if (root.get("namespace")) {
    JITD_ASSIGN_OR_RETURN(auto ns, String(root, "namespace", origin, "the manifest", true));
    if (!IsQualifiedName(ns)) {
      return Bad(
          origin, root.get("namespace")->source(),
          Cat("namespace '", ns, "' is not a C++ namespace name (write it as in code: \"team\" or \"team::ops\")"));
    }
    m.kernel_namespace = ns;
    m.namespace_declared = true;
  }
  if (const toml::node* schema = root.get("schema")) {
    if (!schema->is_integer() || *schema->value<int64_t>() != 1) {
      return Bad(origin, schema->source(), "schema must be 1 (the only manifest schema this jitd reads)");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Manifest> Manifest::Parse(std::string_view text, const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    return absl::InvalidArgumentError(Cat(origin, ":", e.source().begin.line, ": ", std::string(e.description())));
  }
  JITD_RETURN_IF_ERROR(
      CheckKeys(root, {"schema", "namespace", "defaults", "kernel", "adhoc_modules"}, origin, "the manifest"));
  Manifest m;
  JITD_RETURN_IF_ERROR(ParseTopLevel(root, origin, m));
  if (const toml::node* defaults = root.get("defaults")) {
    const toml::table* t = defaults->as_table();
    if (!t) return Bad(origin, defaults->source(), "[defaults] must be a table");
    JITD_RETURN_IF_ERROR(CheckKeys(*t, {"options", "arch_macro"}, origin, "[defaults]"));
    JITD_ASSIGN_OR_RETURN(auto options, Strings(*t, "options", origin, "[defaults]"));
    JITD_RETURN_IF_ERROR(CheckFileOptions(*t, origin, "[defaults]"));
    m.default_options = options;
    JITD_ASSIGN_OR_RETURN(m.arch_macro, String(*t, "arch_macro", origin, "[defaults]", false));
    if (t->get("arch_macro") != nullptr && !IsCIdentifier(m.arch_macro)) {
      return Bad(origin, t->get("arch_macro")->source(),
                 Cat("[defaults]: arch_macro '", m.arch_macro, "' is not a C identifier (e.g. \"SGL_CUDA_ARCH\")"));
    }
  }
  const toml::node* kernels = root.get("kernel");
  if ((!kernels && !m.adhoc_modules) || (kernels && !kernels->is_array_of_tables())) {
    return absl::InvalidArgumentError(Cat(origin, ": no [[kernel]] tables"));
  }
  static const toml::array kNoKernels;
  for (const auto& node : kernels ? *kernels->as_array() : kNoKernels) {
    JITD_ASSIGN_OR_RETURN(auto k, ParseKernel(*node.as_table(), origin));
    if (m.Find(k.name)) return Bad(origin, node.source(), Cat("kernel ", k.name, " is listed twice"));
    m.kernels.push_back(std::move(k));
  }
  // [defaults] reach module kernels too, so they pass nvcc's allow-list
  // when the tree has any.
  const toml::table* defaults = root.get_as<toml::table>("defaults");
  if (defaults != nullptr && (m.adhoc_modules || std::any_of(m.kernels.begin(), m.kernels.end(),
                                                             [](const KernelDef& k) { return k.is_module(); }))) {
    JITD_RETURN_IF_ERROR(CheckModuleOptions(*defaults, origin, "[defaults] (this tree has module kernels)"));
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
