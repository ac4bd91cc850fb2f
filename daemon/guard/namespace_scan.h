// One file's walk against a tree's namespace rule, internal to jitd_guard:
// what CheckSource and CheckSources share. A file's findings need what
// other files say (a macro defined in a header, a primary template a
// header declares and a kernel specialises), so the walk reports those
// facts beside its findings and the caller joins them (source_scan.cpp).
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "guard/namespace_guard.h"
#include "guard/source_tokens.h"

namespace jitd::guard::detail {

// A namespace rule: "team::ops" is {"team", "ops"}.
struct Rule {
  std::string name;
  std::vector<std::string> parts;
};
Rule ParseRule(std::string_view ns);

struct FileScan {
  std::string file;
  std::vector<Finding> findings;
  // Class templates whose primary template is outside the rule, each with
  // its finding (reworded when the rule's namespace specialises it).
  struct OutsideTemplate {
    std::string name;
    size_t finding;     // index into findings
    std::string where;  // "at global scope", "in namespace team"
  };
  std::vector<OutsideTemplate> outside_templates;
  // Class templates specialised inside the rule: name -> line.
  std::map<std::string, int> specialised;
  // Brace macros this file uses.
  std::set<std::string> macros_used;
};

// "opens a namespace", "closes a brace", ...: what a use of `m` does.
std::string MacroAction(const BraceMacro& m);
// "write the namespace out", or "write the brace out" for a macro that
// only opens or closes a brace.
std::string MacroRemedy(const BraceMacro& m);

// Walks the top level of `t` (the tokens of `file`) against `rule`;
// `macros` are the brace macros visible to it (its own and the tree's).
FileScan ScanFile(std::string_view file, const std::vector<Token>& t, const Rule& rule, const BraceMacros& macros);

}  // namespace jitd::guard::detail
