#include "manifest/signature.h"

#include <cxxabi.h>

#include <cctype>
#include <cstdlib>
#include <map>
#include <memory>

#include "jitd/base/text.h"

namespace jitd::manifest {
namespace {

using text::Cat;

std::string Squeeze(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!out.empty() && out.back() != ' ') out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// Splits at the commas outside <>, () and [].
std::vector<std::string> SplitTopLevel(std::string_view list) {
  std::vector<std::string> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const char c = list[i];
    if (c == '<' || c == '(' || c == '[') ++depth;
    if (c == '>' || c == ')' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(Squeeze(list.substr(start, i - start)));
      start = i + 1;
    }
  }
  out.push_back(Squeeze(list.substr(start)));
  return out;
}

// Removes every whole-word `word` from `type` (squeezed again after).
std::string Without(std::string type, std::string_view word) {
  for (size_t at = type.find(word); at != std::string::npos; at = type.find(word, at)) {
    const bool starts = at == 0 || type[at - 1] == ' ';
    const bool ends = at + word.size() == type.size() || type[at + word.size()] == ' ';
    if (starts && ends) {
      type.erase(at, word.size());
    } else {
      at += word.size();
    }
  }
  return Squeeze(type);
}

// "struct NAME" for a class type passed by value (`ns::Params`,
// `Params<float>`, `struct Params`): its unqualified name without template
// arguments, which is what a declared and a compiled signature both say.
// "" when `type` is not a (possibly qualified) class name.
ArgKind StructKind(std::string type) {
  type = Without(type, "struct");
  if (const size_t open = type.find('<'); open != std::string::npos) {
    if (type.back() != '>') return {};
    type.resize(open);
  }
  while (!type.empty() && type.back() == ' ') type.pop_back();
  const size_t colons = type.rfind("::");
  const std::string name = colons == std::string::npos ? type : type.substr(colons + 2);
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return {};
  for (const char c : type) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != ':') return {};
  }
  return Cat("struct ", name);
}

// A type's kind, or "" when it is none a launch passes. `type` is squeezed.
// `by_value_structs`: a class type counts as a struct passed by value (a
// compiled signature); a declared one must say so (`__grid_constant__` or
// `struct`), so that a misspelt scalar is still an error.
ArgKind KindOf(std::string type, bool by_value_structs) {
  // Top-level qualifiers do not change what is passed.
  for (std::string_view q : {" __restrict__", " __restrict", " restrict"}) {
    for (size_t at = type.find(q); at != std::string::npos; at = type.find(q)) type.erase(at, q.size());
  }
  const std::string plain = Without(type, "__grid_constant__");
  if (plain != Squeeze(type)) by_value_structs = true;
  if (Without(plain, "struct") != plain) by_value_structs = true;
  type = plain;
  while (!type.empty() && type.back() == ' ') type.pop_back();
  if (!type.empty() && type.back() == '*') {
    std::string pointee = Squeeze(type.substr(0, type.size() - 1));
    if (!pointee.empty() && pointee.back() == '*') return "pointer";  // a pointer to a pointer
    const bool is_const = pointee.starts_with("const ") || pointee.ends_with(" const");
    return is_const ? "const pointer" : "pointer";
  }
  if (type.starts_with("const ")) type = type.substr(6);
  if (type.ends_with(" const")) type.resize(type.size() - 6);
  static const std::map<std::string, ArgKind, std::less<>> kScalars = {
      {"int64_t", "int64"},         {"long", "int64"},
      {"long long", "int64"},       {"long int", "int64"},
      {"uint64_t", "uint64"},       {"unsigned long", "uint64"},
      {"size_t", "uint64"},         {"unsigned long long", "uint64"},
      {"int32_t", "int32"},         {"int", "int32"},
      {"uint32_t", "uint32"},       {"unsigned", "uint32"},
      {"unsigned int", "uint32"},   {"int16_t", "int16"},
      {"short", "int16"},           {"uint16_t", "uint16"},
      {"unsigned short", "uint16"}, {"int8_t", "int8"},
      {"signed char", "int8"},      {"uint8_t", "uint8"},
      {"unsigned char", "uint8"},   {"float", "float32"},
      {"double", "float64"},        {"bool", "bool"},
  };
  const auto it = kScalars.find(type);
  if (it != kScalars.end()) return it->second;
  return by_value_structs ? StructKind(type) : ArgKind();
}

}  // namespace

absl::StatusOr<std::vector<ArgKind>> DeclaredArgs(std::string_view signature) {
  const std::string s = Squeeze(signature);
  if (s.size() < 2 || s.front() != '(' || s.back() != ')') {
    return absl::InvalidArgumentError(
        Cat("signature '", s, "' is not an argument list in parentheses, as in \"(T* out, const T* x, int64_t n)\""));
  }
  std::vector<ArgKind> out;
  const std::string inner = Squeeze(std::string_view(s).substr(1, s.size() - 2));
  if (inner.empty()) return out;
  for (const std::string& arg : SplitTopLevel(inner)) {
    // "TYPE NAME": the name is the last identifier.
    size_t name_start = arg.size();
    while (name_start > 0 &&
           (std::isalnum(static_cast<unsigned char>(arg[name_start - 1])) || arg[name_start - 1] == '_')) {
      --name_start;
    }
    const std::string type = Squeeze(std::string_view(arg).substr(0, name_start));
    if (name_start == arg.size() || type.empty()) {
      return absl::InvalidArgumentError(Cat("signature argument '", arg, "' needs a type and a name"));
    }
    ArgKind kind = KindOf(type, /*by_value_structs=*/false);
    if (kind.empty()) {
      return absl::InvalidArgumentError(Cat("signature argument '", arg, "' has type '", type,
                                            "', which is neither a pointer nor a fixed-width scalar (int64_t, "
                                            "int32_t, uint32_t, float, double, bool, ...); a struct passed by "
                                            "value is written `const __grid_constant__ NAME` or `struct NAME`"));
    }
    out.push_back(std::move(kind));
  }
  return out;
}

absl::StatusOr<std::vector<ArgKind>> CompiledArgs(std::string_view lowered_name) {
  int status = 0;
  const std::string mangled(lowered_name);
  std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status),
                                                   std::free);
  if (status != 0 || demangled == nullptr) {
    return absl::InvalidArgumentError(Cat("lowered name '", lowered_name, "' does not demangle"));
  }
  const std::string_view text(demangled.get());
  // The argument list is the parenthesised group that ends the text.
  if (text.empty() || text.back() != ')') {
    return absl::InvalidArgumentError(Cat("'", text, "' is not a function"));
  }
  int depth = 0;
  size_t open = std::string_view::npos;
  for (size_t i = text.size(); i-- > 0;) {
    if (text[i] == ')') ++depth;
    if (text[i] == '(' && --depth == 0) {
      open = i;
      break;
    }
  }
  if (open == std::string_view::npos) return absl::InvalidArgumentError(Cat("'", text, "' is not a function"));
  std::vector<ArgKind> out;
  const std::string inner = Squeeze(text.substr(open + 1, text.size() - open - 2));
  if (inner.empty() || inner == "void") return out;
  for (const std::string& type : SplitTopLevel(inner)) {
    ArgKind kind = KindOf(type, /*by_value_structs=*/true);
    if (kind.empty()) {
      return absl::InvalidArgumentError(Cat("'", text, "' takes a '", type,
                                            "', which a signature cannot name (pointers, fixed-width scalars and "
                                            "structs by value)"));
    }
    out.push_back(std::move(kind));
  }
  return out;
}

}  // namespace jitd::manifest
