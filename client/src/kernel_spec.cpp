// The canonical form of a kernel spec that the memo keys by (the params
// text the cache keeps is jitd_base's CanonicalParams).
#include <algorithm>
#include <set>

#include "jitd/base/text.h"
#include "jitd/client.h"

namespace jitd {
namespace {

// Characters CanonicalSpec uses as punctuation, plus the escape itself.
constexpr std::string_view kReserved = "%,=@[]{}";

void AppendEscaped(std::string& out, std::string_view field) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (const char c : field) {
    if (kReserved.find(c) == std::string_view::npos) {
      out.push_back(c);
      continue;
    }
    const auto byte = static_cast<unsigned char>(c);
    out.push_back('%');
    out.push_back(kHex[byte >> 4]);
    out.push_back(kHex[byte & 0xF]);
  }
}

}  // namespace

std::string CanonicalSpec(const KernelSpec& spec) {
  std::string out;
  AppendEscaped(out, spec.kernel);
  out.push_back('{');
  bool first = true;
  for (const auto& [name, value] : spec.params) {
    if (!first) out.push_back(',');
    first = false;
    AppendEscaped(out, name);
    out.push_back('=');
    AppendEscaped(out, value);
  }
  out += "}@";
  if (spec.fleet) {
    out += "%%fleet";  // never the escaping of an arch (a '%' is followed by two hex digits)
  } else if (!spec.archs.empty()) {
    out.push_back('%');
    for (size_t i = 0; i < spec.archs.size(); ++i) {
      if (i > 0) out.push_back(',');
      AppendEscaped(out, spec.archs[i]);
    }
  }
  AppendEscaped(out, spec.arch);
  const std::set<std::string> options(spec.options.begin(), spec.options.end());
  if (!options.empty()) {
    out.push_back('[');
    first = true;
    for (const std::string& option : options) {
      if (!first) out.push_back(',');
      first = false;
      AppendEscaped(out, option);
    }
    out.push_back(']');
  }
  return out;
}

const KernelSymbol* KernelBinary::FindSymbol(std::string_view name_expression) const {
  auto it = std::find_if(symbols.begin(), symbols.end(),
                         [&](const KernelSymbol& symbol) { return symbol.name_expression == name_expression; });
  return it == symbols.end() ? nullptr : &*it;
}

}  // namespace jitd
