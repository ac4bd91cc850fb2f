#include "manifest/toml_fields.h"

#include <algorithm>
#include <cctype>

#include "jitd/base/status.h"
#include "jitd/base/text.h"

namespace jitd::manifest {

using text::Cat;
using text::Join;

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

}  // namespace jitd::manifest
