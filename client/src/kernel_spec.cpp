// Canonical forms of a kernel spec: the cache's params string and the
// memo's key.
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

std::string CanonicalParams(const std::map<std::string, std::string>& params) {
  // Byte for byte what the daemon's resolver stores (ResolvedKernel::params),
  // which sorts the "k=v" texts: that differs from key order where a name
  // extends another with a character below '=' ("n2=" sorts before "n=").
  std::vector<std::string> pairs;
  pairs.reserve(params.size());
  for (const auto& [name, value] : params) pairs.push_back(text::Cat(name, "=", value));
  std::sort(pairs.begin(), pairs.end());
  return text::Join(pairs, ",");
}

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
