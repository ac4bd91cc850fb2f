// The textual half of the guard. Not a C++ parser: comments, string and
// character literals and preprocessor lines are blanked, the rest is split
// into tokens with their line numbers, and the top level is walked construct
// by construct (a construct ends at its ';' or at the '}' matching its
// first '{').
#include <algorithm>
#include <cctype>

#include "guard/namespace_guard.h"
#include "jitd/base/text.h"

namespace jitd::guard {
namespace {

using text::Cat;

struct Token {
  std::string text;
  int line;
};

// Comments, literals and preprocessor lines become spaces (newlines kept, so
// line numbers survive).
std::string BlankNonCode(std::string_view in) {
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
    if (line_start && c == '#') {  // a directive, with backslash continuations
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
      blank(i, end + 1);
      i = end + 1;
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

std::vector<Token> Tokenize(const std::string& code) {
  std::vector<Token> out;
  int line = 1;
  size_t i = 0;
  while (i < code.size()) {
    const auto c = static_cast<unsigned char>(code[i]);
    if (c == '\n') {
      ++line;
      ++i;
    } else if (std::isspace(c)) {
      ++i;
    } else if (std::isalnum(c) || c == '_') {
      size_t end = i;
      while (end < code.size() && (std::isalnum(static_cast<unsigned char>(code[end])) || code[end] == '_')) ++end;
      out.push_back({code.substr(i, end - i), line});
      i = end;
    } else if (c == ':' && i + 1 < code.size() && code[i + 1] == ':') {
      out.push_back({"::", line});
      i += 2;
    } else {
      out.push_back({std::string(1, code[i]), line});
      ++i;
    }
  }
  return out;
}

size_t SkipConstruct(const std::vector<Token>& t, size_t i) {
  for (; i < t.size(); ++i) {
    if (t[i].text == ";") return i + 1;
    if (t[i].text == "{") break;
  }
  int depth = 0;
  for (; i < t.size(); ++i) {
    if (t[i].text == "{") ++depth;
    if (t[i].text == "}" && --depth == 0) {
      // `struct X { ... };` ends at the ';' after the brace.
      return i + 1 < t.size() && t[i + 1].text == ";" ? i + 2 : i + 1;
    }
  }
  return t.size();
}

std::string Snippet(const std::vector<Token>& t, size_t from, size_t to) {
  std::string out;
  for (size_t k = from; k < to && k < from + 10; ++k) {
    if (t[k].text == "{") break;
    bool glue = out.empty() || t[k].text == "::" || out.ends_with("::") || t[k].text == "," || t[k].text == ">" ||
                out.ends_with("<") || t[k].text == "<" || t[k].text == "(" || t[k].text == ")";
    text::Append(out, glue ? "" : " ", t[k].text);
  }
  return out;
}

}  // namespace

std::string Finding::ToString() const {
  return Cat(file, line > 0 ? Cat(":", line) : "", ": ", kernel.empty() ? "" : Cat("[", kernel, "] "), what);
}

std::vector<Finding> CheckSource(std::string_view file, std::string_view source) {
  const std::vector<Token> t = Tokenize(BlankNonCode(source));
  std::vector<Finding> found;
  size_t i = 0;
  while (i < t.size()) {
    if (t[i].text == ";") {
      ++i;
      continue;
    }
    const size_t end = SkipConstruct(t, i);
    Finding f{std::string(file), t[i].line, "", ""};
    if (t[i].text == "namespace" || (t[i].text == "inline" && i + 1 < t.size() && t[i + 1].text == "namespace")) {
      size_t n = t[i].text == "inline" ? i + 2 : i + 1;
      const bool anonymous = n < t.size() && t[n].text == "{";
      const bool sglang = n + 1 < t.size() && t[n].text == "sglang" && (t[n + 1].text == "{" || t[n + 1].text == "::");
      if (anonymous) {
        f.what =
            "top-level anonymous namespace: what it holds is not in namespace sglang (wrap it in namespace sglang)";
        found.push_back(std::move(f));
      } else if (!sglang) {
        f.what = Cat("`", Snippet(t, i, end), "` is not inside namespace sglang (wrap it in namespace sglang)");
        found.push_back(std::move(f));
      }
    } else {
      f.what = Cat("`", Snippet(t, i, end), "` is at global scope, outside namespace sglang");
      found.push_back(std::move(f));
    }
    i = end;
  }
  return found;
}

std::vector<Finding> CheckSources(const manifest::KernelTree& tree) {
  std::vector<Finding> out;
  for (const auto& [rel, content] : tree.files()) {
    bool source = rel.ends_with(".cu") || rel.ends_with(".cuh") || rel.ends_with(".h") || rel.ends_with(".hpp");
    if (!source) continue;
    auto found = CheckSource(rel, content);
    for (auto& f : found) {
      for (const auto& k : tree.manifest().kernels) {
        if (k.source == rel) f.kernel = k.name;
      }
      out.push_back(std::move(f));
    }
  }
  for (const auto& k : tree.manifest().kernels) {
    for (const auto& e : k.name_expressions) {
      if (e.rfind("sglang::", 0) != 0) {
        out.push_back({"kernels.toml", k.line, k.name, Cat("name expression `", e, "` is not in namespace sglang")});
      }
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Finding& a, const Finding& b) { return std::tie(a.file, a.line) < std::tie(b.file, b.line); });
  return out;
}

}  // namespace jitd::guard
