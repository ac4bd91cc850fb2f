// One file's walk: the top level construct by construct, and into a
// namespace that opens the tree's rule part of the way ("team" of
// "team::ops"), where again only the rest of the rule may appear.
#include "guard/namespace_scan.h"

#include <algorithm>
#include <cctype>

#include "jitd/base/text.h"

namespace jitd::guard::detail {
namespace {

using text::Cat;
constexpr size_t kNone = std::string::npos;

bool IsIdentifier(const std::string& s) {
  return !s.empty() && (std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_');
}

bool IsLiteral(const std::string& s) { return !s.empty() && (s[0] == '"' || s[0] == '\''); }

bool HasPrefix(const std::vector<std::string>& path, const std::vector<std::string>& prefix) {
  return path.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), path.begin());
}

// After a template's parameter list (token `a`): the name of the class
// template it declares, and whether a '<' follows the name (a
// specialisation); "" when it declares no class template.
std::string ClassTemplateName(const std::vector<Token>& t, size_t a, size_t limit, bool* specialisation) {
  if (a >= limit || (t[a].text != "struct" && t[a].text != "class" && t[a].text != "union")) return "";
  for (size_t k = a + 1; k < limit; ++k) {
    if (!IsIdentifier(t[k].text)) return "";
    if (k + 1 < limit && t[k + 1].text == "(") {  // alignas(16), __align__(16)
      while (k < limit && t[k].text != ")") ++k;
      continue;
    }
    *specialisation = k + 1 < limit && t[k + 1].text == "<";
    return t[k].text;
  }
  return "";
}

class Walker {
 public:
  Walker(std::string_view file, const std::vector<Token>& t, const Rule& rule, const BraceMacros& macros, FileScan& out)
      : file_(file), t_(t), rule_(rule), macros_(macros), out_(out) {}

  // Every use of a brace macro, wherever it is: the code around it is in a
  // namespace the scan cannot name.
  void MacroUses() {
    for (const Token& token : t_) {
      const auto it = macros_.find(token.text);
      if (it == macros_.end()) continue;
      const BraceMacro& m = it->second;
      out_.macros_used.insert(m.name);
      Add(token.line, Cat("`", m.name, "` ", MacroAction(m), " through a macro (defined at ", m.file, ":", m.line,
                          "): the guard cannot see through it (", MacroRemedy(m), ")"));
    }
  }

  // The constructs of [from, to): a namespace level inside the first
  // `matched` parts of the rule (0: the top level).
  void Level(size_t from, size_t to, size_t matched) {
    for (size_t i = from; i < to;) {
      if (t_[i].text == ";") {
        ++i;
        continue;
      }
      const Extent x = ConstructAt(t_, i, to, macros_);
      Construct(x, matched);
      i = x.end;
    }
  }

 private:
  void Construct(const Extent& x, size_t matched) {
    const std::string& first = t_[x.begin].text;
    if (macros_.count(first)) return;  // MacroUses said it
    const std::string& second = x.begin + 1 < x.end ? t_[x.begin + 1].text : "";
    if (first == "namespace") return Namespace(x, x.begin + 1, matched);
    if (first == "inline" && second == "namespace") return Namespace(x, x.begin + 2, matched);
    if (first == "extern" && IsLiteral(second)) return Linkage(x, matched);
    if (first == "using" && second == "namespace") return UsingDirective(x, matched);
    Outside(x, matched);
  }

  void Namespace(const Extent& x, size_t n, size_t matched) {
    const int line = t_[x.begin].line;
    if (n < x.end && t_[n].text == "{") {
      Add(line, matched == 0
                    ? Cat("top-level anonymous namespace: what it holds is not in namespace ", rule_.name, " ", Wrap())
                    : Cat("anonymous namespace ", Where(matched), ": what it holds is not in namespace ", rule_.name,
                          " ", Wrap()));
      return;
    }
    std::vector<std::string> path(rule_.parts.begin(), rule_.parts.begin() + static_cast<long>(matched));
    size_t k = n;
    while (k < x.end && (t_[k].text == "inline" || IsIdentifier(t_[k].text))) {
      if (t_[k].text != "inline") path.push_back(t_[k].text);
      if (++k < x.end && t_[k].text == "::") ++k;
    }
    const bool body = k == x.open && x.close != kNone;
    if (body && HasPrefix(path, rule_.parts)) {
      LinkageInside(x.open + 1, x.close, path);
      return Specialisations(x.open + 1, x.close);
    }
    if (body && HasPrefix(rule_.parts, path)) return Level(x.open + 1, x.close, path.size());
    const std::string snippet = Snippet(t_, x.begin, x.end);
    Add(line, matched == 0
                  ? Cat("`", snippet, "` is not inside namespace ", rule_.name, " ", Wrap())
                  : Cat("`", snippet, "` is ", Where(matched), " but not inside namespace ", rule_.name, " ", Wrap()));
  }

  // `extern "C" ...` / `extern "C" { ... }`. An `extern "C++" { }` block
  // changes nothing: what it holds is walked as if it stood here.
  void Linkage(const Extent& x, size_t matched) {
    const std::string& literal = t_[x.begin + 1].text;
    const bool block = x.open == x.begin + 2 && x.close != kNone;
    if (literal == "\"C++\"") return block ? Level(x.open + 1, x.close, matched) : Outside(x, matched);
    const std::string remedy = Cat("(declare it in namespace ", rule_.name, " without extern ", literal,
                                   "; a name expression finds it there)");
    if (!block) {
      Add(t_[x.begin].line, Cat("`", Snippet(t_, x.begin, x.end), "` is ", Where(matched), ": extern ", literal,
                                " gives it a C name outside namespace ", rule_.name, " ", remedy));
      return;
    }
    size_t inner = x.open + 1;
    while (inner < x.close && t_[inner].text == ";") ++inner;
    const std::string first =
        inner < x.close ? Cat(" (`", Snippet(t_, inner, ConstructAt(t_, inner, x.close, macros_).end), "`)") : "";
    Add(t_[x.begin].line,
        Cat("`extern ", literal, " { ... }` block ", Where(matched), ": extern ", literal, " gives what it declares",
            first, " C names outside namespace ", rule_.name, " ", remedy));
  }

  void UsingDirective(const Extent& x, size_t matched) {
    const std::string snippet = Snippet(t_, x.begin, x.end);
    Add(t_[x.begin].line,
        Cat("`", snippet, "` ", Where(matched), " only makes names visible: what is defined after it is still ",
            matched == 0 ? "global" : Where(matched).substr(3), ", outside namespace ", rule_.name,
            " (wrap the definitions in namespace ", rule_.name, " instead of using it)"));
    if (using_line_ == 0) {
      using_line_ = t_[x.begin].line;
      using_text_ = snippet;
    }
  }

  void Outside(const Extent& x, size_t matched) {
    const int line = t_[x.begin].line;
    const std::string note = using_line_ != 0 && using_line_ < line
                                 ? Cat("the `", using_text_, "` on line ", using_line_, " does not put it there; ")
                                 : "";
    Add(line, Cat("`", Snippet(t_, x.begin, x.end), "` is ", Where(matched), ", outside namespace ", rule_.name, " (",
                  note, "wrap it in namespace ", rule_.name, ")"));
    bool specialisation = false;
    if (t_[x.begin].text != "template" || x.begin + 1 >= x.end || t_[x.begin + 1].text != "<") return;
    const size_t after = AfterAngles(t_, x.begin + 1, x.end);
    if (after == kNone) return;
    std::string name = ClassTemplateName(t_, after, x.end, &specialisation);
    if (!name.empty() && !specialisation) {
      out_.outside_templates.push_back({std::move(name), out_.findings.size() - 1, Where(matched)});
    }
  }

  // `extern "C"` inside the rule's namespace: a C name has no namespace,
  // so what it declares is as global as at the top level.
  void LinkageInside(size_t from, size_t to, const std::vector<std::string>& path) {
    for (size_t k = from; k + 1 < to; ++k) {
      if (t_[k].text != "extern" || !IsLiteral(t_[k + 1].text) || t_[k + 1].text == "\"C++\"") continue;
      const std::string& literal = t_[k + 1].text;
      Add(t_[k].line,
          Cat("`", Snippet(t_, k, ConstructAt(t_, k, to, macros_).end), "` in namespace ", text::Join(path, "::"),
              ": extern ", literal, " gives it a C name, which no namespace holds (", "declare it without extern ",
              literal, "; a name expression finds it in namespace ", rule_.name, ")"));
    }
  }

  // The class templates a rule-abiding namespace body specialises.
  void Specialisations(size_t from, size_t to) {
    for (size_t k = from; k + 1 < to; ++k) {
      if (t_[k].text != "template" || t_[k + 1].text != "<") continue;
      const size_t after = AfterAngles(t_, k + 1, to);
      bool specialisation = false;
      const std::string name = after == kNone ? "" : ClassTemplateName(t_, after, to, &specialisation);
      if (!name.empty() && specialisation) out_.specialised.emplace(name, t_[k].line);
    }
  }

  // "at global scope", or "in namespace team" inside the rule's first part.
  std::string Where(size_t matched) const {
    if (matched == 0) return "at global scope";
    std::vector<std::string> parts(rule_.parts.begin(), rule_.parts.begin() + static_cast<long>(matched));
    return Cat("in namespace ", text::Join(parts, "::"));
  }
  std::string Wrap() const { return Cat("(wrap it in namespace ", rule_.name, ")"); }
  void Add(int line, std::string what) { out_.findings.push_back({std::string(file_), line, "", std::move(what)}); }

  std::string_view file_;
  const std::vector<Token>& t_;
  const Rule& rule_;
  const BraceMacros& macros_;
  FileScan& out_;
  int using_line_ = 0;
  std::string using_text_;
};

}  // namespace

Rule ParseRule(std::string_view ns) {
  Rule rule{std::string(ns), {}};
  size_t start = 0;
  while (start <= ns.size()) {
    const size_t end = ns.find("::", start);
    rule.parts.emplace_back(ns.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 2;
  }
  return rule;
}

std::string MacroAction(const BraceMacro& m) {
  if (m.delta > 0) return m.names_namespace ? "opens a namespace" : "opens a brace";
  if (m.delta < 0) return m.names_namespace ? "closes a namespace" : "closes a brace";
  return "names a namespace";
}

std::string MacroRemedy(const BraceMacro& m) {
  return m.names_namespace ? "write the namespace out" : "write the brace out";
}

FileScan ScanFile(std::string_view file, const std::vector<Token>& t, const Rule& rule, const BraceMacros& macros) {
  FileScan out;
  out.file = std::string(file);
  Walker walker(file, t, rule, macros, out);
  walker.MacroUses();
  walker.Level(0, t.size(), 0);
  return out;
}

}  // namespace jitd::guard::detail
