// Checks across the trees served together: a header two trees share.
#include <algorithm>
#include <map>

#include "guard/namespace_guard.h"
#include "guard/namespace_scan.h"
#include "jitd/base/text.h"
#include "jitd/keys/content_key.h"

namespace jitd::guard {
namespace {

using text::Cat;

bool IsHeader(const std::string& rel) { return rel.ends_with(".cuh") || rel.ends_with(".h") || rel.ends_with(".hpp"); }

// The headers a tree's kernels include: path -> the first kernel (in
// manifest order) that includes it.
std::map<std::string, std::string> IncludedHeaders(const manifest::KernelTree& tree) {
  std::map<std::string, std::string> out;
  for (const auto& k : tree.manifest().kernels) {
    const auto names = keys::IncludeNames(tree.files(), k.source);
    if (!names.ok()) continue;  // a missing source or an ambiguous include: the resolver says which
    for (const auto& n : *names) {
      if (n.path != k.source && IsHeader(n.path) && tree.File(n.path)) out.emplace(n.path, k.name);
    }
  }
  return out;
}

std::string InTree(const std::string& tree, const std::string& path) {
  return tree.empty() ? path : Cat(tree, "/", path);
}

bool Encloses(const detail::Rule& outer, const detail::Rule& inner) {
  return inner.parts.size() >= outer.parts.size() &&
         std::equal(outer.parts.begin(), outer.parts.end(), inner.parts.begin());
}

// Why one header in two trees is a problem, given both trees' rules.
std::string SharedHeader(const std::string& tree_a, const std::string& kernel_a, const std::string& ns_a,
                         const std::string& tree_b, const std::string& path_b, const std::string& kernel_b,
                         const std::string& ns_b) {
  const std::string both =
      Cat("header included by kernels of two trees is byte-identical to ", InTree(tree_b, path_b), " (", tree_a, ": ",
          kernel_a, ", namespace ", ns_a, "; ", tree_b, ": ", kernel_b, ", namespace ", ns_b, ")");
  const detail::Rule a = detail::ParseRule(ns_a);
  const detail::Rule b = detail::ParseRule(ns_b);
  if (ns_a == ns_b) {
    return Cat(both, ": shared code, whose copies drift apart; it should live in one tree ",
               "(serve the kernels that need it from that tree)");
  }
  if (Encloses(a, b) || Encloses(b, a)) {
    return Cat(both, ": only namespace ", Encloses(a, b) ? ns_b : ns_a,
               " satisfies both rules, and it is still shared code that should live in one tree ",
               "(serve the kernels that need it from that tree)");
  }
  return Cat(both, ": one text can satisfy at most one tree's namespace rule ",
             "(give each tree its own header, in its own namespace)");
}

}  // namespace

std::vector<Finding> CheckTreesShareNoHeaders(
    const std::vector<std::pair<std::string, const manifest::KernelTree*>>& trees) {
  std::vector<std::map<std::string, std::string>> included;
  for (const auto& [name, tree] : trees) included.push_back(IncludedHeaders(*tree));
  std::vector<Finding> out;
  for (size_t a = 0; a < trees.size(); ++a) {
    const manifest::KernelTree& ta = *trees[a].second;
    for (size_t b = a + 1; b < trees.size(); ++b) {
      const manifest::KernelTree& tb = *trees[b].second;
      // Tree b's included headers by content: a copy may sit at another path.
      std::map<std::string_view, const std::string*> by_content;
      for (const auto& [path, kernel] : included[b]) by_content.emplace(*tb.File(path), &path);
      for (const auto& [path, kernel] : included[a]) {
        const auto it = by_content.find(*ta.File(path));
        if (it == by_content.end()) continue;
        const std::string& path_b = *it->second;
        out.push_back({InTree(trees[a].first, path), 0, "",
                       SharedHeader(trees[a].first, kernel, ta.manifest().kernel_namespace, trees[b].first, path_b,
                                    included[b].at(path_b), tb.manifest().kernel_namespace)});
      }
    }
  }
  return out;
}

}  // namespace jitd::guard
