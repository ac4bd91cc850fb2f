// Tokens, brace macros and construct extents for the textual guard.
#include "guard/source_tokens.h"

#include <cctype>

#include "jitd/base/text.h"

namespace jitd::guard::detail {
namespace {

bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Comments become spaces; string and character literals keep their quotes
// around spaces (so a literal stays one token, and a brace or `namespace`
// inside one is not code); preprocessor lines become spaces unless
// `keep_directives`. Newlines are kept, so offsets and lines survive.
std::string Blank(std::string_view in, bool keep_directives) {
  std::string out(in);
  size_t i = 0;
  bool line_start = true;
  auto blank = [&](size_t from, size_t to) {
    for (size_t k = from; k < to && k < out.size(); ++k) {
      if (out[k] != '\n') out[k] = ' ';
    }
  };
  while (i < out.size()) {
    const char c = out[i];
    if (line_start && c == '#' && !keep_directives) {  // a directive, with backslash continuations
      size_t end = i;
      while (end < out.size() && !(out[end] == '\n' && (end == 0 || out[end - 1] != '\\'))) ++end;
      blank(i, end);
      i = end;
      continue;
    }
    if (c == '/' && i + 1 < out.size() && out[i + 1] == '/') {
      size_t end = out.find('\n', i);
      if (end == std::string::npos) end = out.size();
      blank(i, end);
      i = end;
      continue;
    }
    if (c == '/' && i + 1 < out.size() && out[i + 1] == '*') {
      size_t end = out.find("*/", i + 2);
      end = end == std::string::npos ? out.size() : end + 2;
      blank(i, end);
      i = end;
      continue;
    }
    if (c == '"' || c == '\'') {
      size_t end = i + 1;
      while (end < out.size() && out[end] != c && out[end] != '\n') end += out[end] == '\\' ? 2 : 1;
      blank(i + 1, end);
      i = end < out.size() && out[end] == c ? end + 1 : end;
      continue;
    }
    if (c == '\n') {
      line_start = true;
    } else if (!std::isspace(static_cast<unsigned char>(c))) {
      line_start = false;
    }
    ++i;
  }
  return out;
}

// Splits blanked `code` into tokens; a literal's text is taken from
// `original` (same offsets).
std::vector<Token> Split(std::string_view code, std::string_view original) {
  std::vector<Token> out;
  int line = 1;
  size_t i = 0;
  while (i < code.size()) {
    const char c = code[i];
    if (c == '\n') {
      ++line;
      ++i;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (IsWordChar(c)) {
      size_t end = i;
      while (end < code.size() && IsWordChar(code[end])) ++end;
      out.push_back({std::string(code.substr(i, end - i)), line});
      i = end;
    } else if (c == '"' || c == '\'') {
      size_t end = i + 1;
      while (end < code.size() && code[end] != c && code[end] != '\n') ++end;
      if (end < code.size() && code[end] == c) ++end;
      out.push_back({std::string(original.substr(i, end - i)), line});
      i = end;
    } else if (c == ':' && i + 1 < code.size() && code[i + 1] == ':') {
      out.push_back({"::", line});
      i += 2;
    } else {
      out.push_back({std::string(1, c), line});
      ++i;
    }
  }
  return out;
}

std::string CollapseSpaces(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!out.empty() && out.back() != ' ') out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// `directive` (continuations joined, comments blanked) as a brace macro,
// if it is a #define of one.
bool ParseDefine(std::string_view directive, BraceMacro& macro) {
  size_t i = directive.find('#') + 1;
  while (i < directive.size() && std::isspace(static_cast<unsigned char>(directive[i]))) ++i;
  if (directive.substr(i, 6) != "define" || i + 6 >= directive.size() || IsWordChar(directive[i + 6])) return false;
  i += 6;
  while (i < directive.size() && std::isspace(static_cast<unsigned char>(directive[i]))) ++i;
  const size_t name_begin = i;
  while (i < directive.size() && IsWordChar(directive[i])) ++i;
  if (i == name_begin) return false;
  macro.name = std::string(directive.substr(name_begin, i - name_begin));
  if (i < directive.size() && directive[i] == '(') {  // a function-like macro's parameters
    const size_t close = directive.find(')', i);
    i = close == std::string_view::npos ? directive.size() : close + 1;
  }
  const std::string_view replacement = directive.substr(i);
  for (const Token& t : Split(replacement, replacement)) {
    if (t.text == "{") ++macro.delta;
    if (t.text == "}") --macro.delta;
    if (t.text == "namespace") macro.names_namespace = true;
  }
  macro.definition = CollapseSpaces(directive);
  return macro.delta != 0 || macro.names_namespace;
}

}  // namespace

std::vector<Token> Tokenize(std::string_view source) { return Split(Blank(source, false), source); }

std::vector<BraceMacro> FindBraceMacros(std::string_view file, std::string_view source) {
  const std::string code = Blank(source, true);
  std::vector<BraceMacro> out;
  size_t pos = 0;
  int line = 1;
  while (pos < code.size()) {
    const int first_line = line;
    std::string directive;
    size_t end = code.find('\n', pos);
    const size_t text_start = code.find_first_not_of(" \t\r\f\v", pos);
    const bool is_directive = text_start != std::string::npos && text_start < end && code[text_start] == '#';
    // A directive runs on over lines ending in a backslash.
    while (true) {
      if (end == std::string::npos) end = code.size();
      directive.append(code, pos, end - pos);
      pos = end + 1;
      if (end == code.size() || end == 0 || code[end - 1] != '\\' || !is_directive) break;
      directive.back() = ' ';
      ++line;
      end = code.find('\n', pos);
    }
    ++line;
    BraceMacro macro;
    if (is_directive && ParseDefine(directive, macro)) {
      macro.file = std::string(file);
      macro.line = first_line;
      bool seen = false;
      for (const auto& m : out) seen = seen || m.name == macro.name;
      if (!seen) out.push_back(std::move(macro));
    }
  }
  return out;
}

int BraceDelta(const Token& token, const BraceMacros& macros) {
  if (token.text == "{") return 1;
  if (token.text == "}") return -1;
  if (macros.empty()) return 0;
  const auto it = macros.find(token.text);
  return it == macros.end() ? 0 : it->second.delta;
}

Extent ConstructAt(const std::vector<Token>& t, size_t begin, size_t limit, const BraceMacros& macros) {
  Extent x;
  x.begin = begin;
  int depth = 0;
  for (size_t i = begin; i < limit; ++i) {
    const int d = BraceDelta(t[i], macros);
    if (d == 0) {
      if (depth == 0 && t[i].text == ";") {
        x.end = i + 1;
        return x;
      }
      continue;
    }
    if (d > 0 && x.open == std::string::npos) x.open = i;
    depth += d;
    if (depth <= 0) {
      // `struct X { ... };` ends at the ';' after the brace.
      x.close = i;
      x.end = i + 1 < limit && t[i + 1].text == ";" ? i + 2 : i + 1;
      return x;
    }
  }
  x.end = limit;
  return x;
}

std::string Snippet(const std::vector<Token>& t, size_t from, size_t to) {
  std::string out;
  for (size_t k = from; k < to && k < from + 10; ++k) {
    if (t[k].text == "{") break;
    bool glue = out.empty() || t[k].text == "::" || out.ends_with("::") || t[k].text == "," || t[k].text == ">" ||
                out.ends_with("<") || out.ends_with("(") || t[k].text == "<" || t[k].text == "(" || t[k].text == ")" ||
                t[k].text == ";";
    text::Append(out, glue ? "" : " ", t[k].text);
  }
  return out;
}

size_t AfterAngles(const std::vector<Token>& t, size_t i, size_t limit) {
  int depth = 0;
  for (; i < limit; ++i) {
    if (t[i].text == "<") ++depth;
    if (t[i].text == ">" && --depth == 0) return i + 1;
    if (t[i].text == "{" || t[i].text == ";") break;
  }
  return std::string::npos;
}

}  // namespace jitd::guard::detail
