// Tokens, brace macros and construct extents for the textual guard.
#include "guard/source_tokens.h"

#include <cctype>

#include "jitd/base/text.h"

namespace jitd::guard::detail {
namespace {

bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Whether the '\n' at `newline` ends a spliced line: a backslash before it,
// blanks (and a '\r') between them allowed, as compilers accept.
bool Spliced(std::string_view s, size_t newline) {
  size_t k = newline;
  while (k > 0 && (s[k - 1] == ' ' || s[k - 1] == '\t' || s[k - 1] == '\r')) --k;
  return k > 0 && s[k - 1] == '\\';
}

// A directive's '#' at `i`, or its digraph "%:".
bool IsHash(std::string_view s, size_t i) {
  return s[i] == '#' || (s[i] == '%' && i + 1 < s.size() && s[i + 1] == ':');
}

// Whether the '\'' at `i` separates digits (1'000'000): it follows a
// pp-number, which starts with a digit.
bool DigitSeparator(std::string_view s, size_t i) {
  size_t k = i;
  while (k > 0 && (IsWordChar(s[k - 1]) || s[k - 1] == '\'' || s[k - 1] == '.')) --k;
  return k < i && std::isdigit(static_cast<unsigned char>(s[k]));
}

// Where the raw string literal whose '"' is at `quote` ends (after its
// closing quote), or npos when the '"' does not open one: R"delim(...)delim",
// R preceded by nothing of an identifier but an encoding prefix (u8, u, U, L).
size_t RawStringEnd(std::string_view s, size_t quote) {
  if (quote == 0 || s[quote - 1] != 'R') return std::string::npos;
  size_t p = quote - 1;  // the R
  for (std::string_view prefix : {"u8", "u", "U", "L"}) {
    if (p >= prefix.size() && s.substr(p - prefix.size(), prefix.size()) == prefix) {
      p -= prefix.size();
      break;
    }
  }
  if (p > 0 && IsWordChar(s[p - 1])) return std::string::npos;
  const size_t open = s.find('(', quote + 1);
  if (open == std::string::npos || open - quote - 1 > 16) return std::string::npos;
  const std::string close = text::Cat(")", s.substr(quote + 1, open - quote - 1), "\"");
  const size_t end = s.find(close, open + 1);
  return end == std::string::npos ? s.size() : end + close.size();
}

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
    if (line_start && IsHash(out, i) && !keep_directives) {  // a directive, with backslash continuations
      size_t end = i;
      while (end < out.size() && !(out[end] == '\n' && !Spliced(out, end))) ++end;
      blank(i, end);
      i = end;
      continue;
    }
    if (c == '/' && i + 1 < out.size() && out[i + 1] == '/') {
      // A line comment ending in a backslash goes on over the next line.
      size_t end = i;
      while (end < out.size() && !(out[end] == '\n' && !Spliced(out, end))) ++end;
      blank(i, end);
      i = end;
      continue;
    }
    if (c == '"' && RawStringEnd(out, i) != std::string::npos) {
      // A raw string spans lines and holds quotes: an empty literal "" in
      // its place, its lines kept.
      const size_t end = RawStringEnd(out, i);
      blank(i, end);
      out[i] = '"';
      if (i + 1 < out.size()) out[i + 1] = '"';
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
    if (c == '"' || (c == '\'' && !DigitSeparator(out, i))) {
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

// The token the alternative spelling at `i` stands for ("<%" is "{"), or
// null. "<::" not followed by ':' or '>' is '<' then "::" (C++11 [lex.pptoken]).
const char* Digraph(std::string_view code, size_t i) {
  if (i + 1 >= code.size()) return nullptr;
  const char a = code[i], b = code[i + 1];
  if (a == '<' && b == '%') return "{";
  if (a == '%' && b == '>') return "}";
  if (a == ':' && b == '>') return "]";
  if (a == '%' && b == ':') return "#";
  if (a == '<' && b == ':') {
    const bool lone = i + 2 < code.size() && code[i + 2] == ':' &&
                      !(i + 3 < code.size() && (code[i + 3] == ':' || code[i + 3] == '>'));
    return lone ? nullptr : "[";
  }
  return nullptr;
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
    } else if (c == '"' || (c == '\'' && !DigitSeparator(code, i))) {
      size_t end = i + 1;
      while (end < code.size() && code[end] != c && code[end] != '\n') ++end;
      if (end < code.size() && code[end] == c) ++end;
      out.push_back({std::string(original.substr(i, end - i)), line});
      i = end;
    } else if (c == ':' && i + 1 < code.size() && code[i + 1] == ':') {
      out.push_back({"::", line});
      i += 2;
    } else if (const char* digraph = Digraph(code, i)) {
      out.push_back({digraph, line});
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
  size_t i = directive.find_first_not_of(" \t\r\f\v");
  i += i != std::string_view::npos && directive[i] == '%' ? 2 : 1;  // "#" or "%:"
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
    const bool is_directive = text_start != std::string::npos && text_start < end && IsHash(code, text_start);
    // A directive runs on over lines ending in a backslash.
    while (true) {
      if (end == std::string::npos) end = code.size();
      directive.append(code, pos, end - pos);
      pos = end + 1;
      if (end == code.size() || !Spliced(code, end) || !is_directive) break;
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
