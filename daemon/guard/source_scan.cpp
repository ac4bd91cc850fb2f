// The textual half of the guard. Not a C++ parser: comments, literals'
// contents and preprocessor lines are blanked (as the compiler delimits
// them: a line splice continues a // comment, a raw string spans lines),
// the rest is split into tokens with their line numbers, digraphs read as
// the braces they stand for (source_tokens.h), and the top level is
// walked construct by construct against the tree's namespace rule
// (namespace_scan.h; a construct ends at its ';' or at the '}' matching its
// first '{'). Here the walks of a file or a tree are joined: what one file
// defines (a brace macro, a class template) can be what another misuses.
#include <algorithm>
#include <iterator>
#include <set>
#include <tuple>

#include "guard/namespace_guard.h"
#include "guard/namespace_scan.h"
#include "guard/source_tokens.h"
#include "jitd/base/text.h"
#include "jitd/keys/content_key.h"

namespace jitd::guard {
namespace {

using detail::BraceMacros;
using detail::FileScan;
using text::Cat;

bool IsSource(const std::string& rel) {
  return rel.ends_with(".cu") || rel.ends_with(".cuda") || rel.ends_with(".cuh") || rel.ends_with(".h") ||
         rel.ends_with(".hpp");
}

// What the scans of a file or a tree say together: each brace macro's
// definition (one naming `namespace` always; one that only opens or closes
// a brace when something uses it, since until then it changes nothing the
// scan reads), and the primary templates outside the rule that the rule's
// namespace specialises, reworded to say so.
std::vector<Finding> Join(std::vector<FileScan>& scans, const BraceMacros& macros, const std::string& ns) {
  std::map<std::string, std::pair<std::string, int>> specialised;  // name -> (file, line)
  std::set<std::string> used;
  for (const FileScan& s : scans) {
    for (const auto& [name, line] : s.specialised) {
      specialised.emplace(name, std::make_pair(s.file, line));
    }
    used.insert(s.macros_used.begin(), s.macros_used.end());
  }
  std::vector<Finding> out;
  for (FileScan& s : scans) {
    for (const auto& t : s.outside_templates) {
      const auto it = specialised.find(t.name);
      if (it == specialised.end()) continue;
      const auto& [file, line] = it->second;
      s.findings[t.finding].what =
          Cat("primary template `", t.name, "` is ", t.where, " although specialised in namespace ", ns, " (",
              file == s.file ? Cat("line ", line) : Cat(file, ":", line),
              "): move the primary template into namespace ", ns, " (a specialisation must be in its namespace)");
    }
    std::move(s.findings.begin(), s.findings.end(), std::back_inserter(out));
  }
  for (const auto& [name, m] : macros) {
    if (!m.names_namespace && !used.count(name)) continue;
    out.push_back({m.file, m.line, "",
                   Cat("`", m.definition, "` ", detail::MacroAction(m),
                       " in a macro: the guard skips preprocessor lines, so it cannot see which namespace the "
                       "code after a use is in (",
                       detail::MacroRemedy(m), ")")});
  }
  std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    return std::tie(a.file, a.line) < std::tie(b.file, b.line);
  });
  return out;
}

}  // namespace

std::string Finding::ToString() const {
  return Cat(file, line > 0 ? Cat(":", line) : "", ": ", kernel.empty() ? "" : Cat("[", kernel, "] "), what);
}

std::vector<Finding> CheckSource(std::string_view file, std::string_view source, std::string_view ns) {
  BraceMacros macros;
  for (auto& m : detail::FindBraceMacros(file, source)) macros.emplace(m.name, std::move(m));
  const detail::Rule rule = detail::ParseRule(ns);
  std::vector<FileScan> scans;
  scans.push_back(detail::ScanFile(file, detail::Tokenize(source), rule, macros));
  return Join(scans, macros, rule.name);
}

std::vector<std::string> ScannedFiles(const manifest::KernelTree& tree) {
  std::set<std::string> out;
  for (const auto& [rel, content] : tree.files()) {
    if (IsSource(rel)) out.insert(rel);
  }
  for (const auto& k : tree.manifest().kernels) {
    if (tree.File(k.source)) out.insert(k.source);
    // What NVRTC is given is exactly this closure (compile_job.h), whatever
    // the files are called. One that cannot be computed fails the kernel's
    // resolution, which says why.
    const auto names = keys::IncludeNames(tree.files(), k.source);
    if (!names.ok()) continue;
    for (const keys::IncludeName& n : *names) {
      if (tree.File(n.path)) out.insert(n.path);
    }
  }
  return {out.begin(), out.end()};
}

std::vector<Finding> CheckSources(const manifest::KernelTree& tree) {
  const manifest::Manifest& manifest = tree.manifest();
  const detail::Rule rule = detail::ParseRule(manifest.kernel_namespace);
  const std::vector<std::string> files = ScannedFiles(tree);
  // A macro defined in one file is used in others (a header's BEGIN_NS):
  // every file is scanned knowing every file's brace macros.
  BraceMacros macros;
  for (const std::string& rel : files) {
    for (auto& m : detail::FindBraceMacros(rel, *tree.File(rel))) macros.emplace(m.name, std::move(m));
  }
  std::vector<FileScan> scans;
  for (const std::string& rel : files) {
    scans.push_back(detail::ScanFile(rel, detail::Tokenize(*tree.File(rel)), rule, macros));
  }
  std::vector<Finding> out = Join(scans, macros, rule.name);
  for (auto& f : out) {
    for (const auto& k : manifest.kernels) {
      if (k.source == f.file) f.kernel = k.name;
    }
  }
  for (const auto& k : manifest.kernels) {
    for (const auto& e : k.name_expressions) {
      if (e.rfind(rule.name + "::", 0) != 0) {
        out.push_back({"kernels.toml", k.line, k.name,
                       Cat("name expression `", e, "` is not in namespace ", rule.name, " (it must start with ",
                           rule.name, "::)")});
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    return std::tie(a.file, a.line) < std::tie(b.file, b.line);
  });
  return out;
}

}  // namespace jitd::guard
