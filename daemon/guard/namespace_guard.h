// The namespace guard: proves, before any request is made, that every kernel
// jitd ships lives in its tree's namespace (kernels.toml `namespace`,
// "sglang" unless the tree says otherwise) and that every registered
// instantiation compiles and resolves. The one public header of `jitd_guard`.
//
// Three checks, each producing one Finding per problem:
//  * CheckSources (textual, milliseconds; the daemon runs it at start): every
//    .cu/.cuh/.h/.hpp file of the kernels directory, registered in the
//    manifest or not, holds at its top level nothing but `namespace NS
//    { ... }` (or `namespace NS::x { ... }`; for a rule "team::ops" also
//    `namespace team { namespace ops { ... } }`), includes and macros aside;
//    and every manifest name expression starts with NS::. It names each way
//    a namespace migration misses code:
//      - a top-level anonymous namespace;
//      - a pseudo-namespace (`sglang_modulate_scale_shift`) never wrapped in
//        the namespace, or any other global declaration;
//      - `extern "C"` at global scope (a C name, outside any namespace);
//      - a top-level `using namespace NS;` (what follows is still global);
//      - a #define that opens, closes or names a namespace, and its uses
//        (the scan skips preprocessor lines, so it cannot see through one);
//      - a primary class template at global scope that NS specialises.
//  * CheckTreesShareNoHeaders (textual, for several trees served together):
//    a header byte-identical in two trees and included by kernels of both.
//  * CompileAll (NVRTC, minutes; `jitd lint`, warm-up, CI): every manifest
//    instantiation for every arch compiles and each name expression lowers.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/compile_job.h"
#include "manifest/manifest.h"

namespace jitd::guard {

struct Finding {
  std::string file;    // relative to the kernels directory
  int line = 0;        // 1-based; 0 when not tied to a line
  std::string kernel;  // manifest kernel name, when known
  std::string what;    // what is missing or wrong
  // "file:line: [kernel] what"
  std::string ToString() const;
};

// What of one source is not inside namespace `ns` (a qualified name:
// "sglang", "team::ops"), sorted by line. A brace macro counts only where
// this source defines it (CheckSources knows the whole tree's).
std::vector<Finding> CheckSource(std::string_view file, std::string_view source, std::string_view ns = "sglang");

// CheckSource over every source file of the tree against its manifest's
// kernel_namespace, plus the manifest's name expressions. A brace macro
// or class template one file defines counts in every file. Findings are
// sorted by file and line.
std::vector<Finding> CheckSources(const manifest::KernelTree& tree);

// For trees served together, as (tree name, tree): each header (.cuh, .h,
// .hpp) that a kernel of one tree includes (directly or transitively) and
// whose bytes are those of a header a kernel of another tree includes; one
// finding per header and pair of trees, its `file` "tree/path" (line 0).
// Under two rules neither of which encloses the other, one text can satisfy
// at most one of them. Under the same rule (or nested ones) it is still
// reported: two copies of shared code drift apart, and the tree that has
// it should be the one that serves the kernels needing it. Kernels whose
// includes cannot be resolved are left to the resolver, which reports them.
std::vector<Finding> CheckTreesShareNoHeaders(
    const std::vector<std::pair<std::string, const manifest::KernelTree*>>& trees);

using CompileFunction = std::function<absl::StatusOr<compiler::CompileResult>(const compiler::CompileJob&)>;
// Called after each instantiation: (done, total, kernel, params, arch, ok).
using Progress = std::function<void(size_t, size_t, const std::string&, const std::string&, const std::string&, bool)>;

// "" when a kernel's declared signature (kernels.toml `signature`) passes
// what the compiled entry point with `lowered_name` takes, argument by
// argument (pointer or not, const, scalar width); else what differs.
std::string SignatureMismatch(std::string_view declared, std::string_view lowered_name);

// Compiles every instantiation for every arch with `compile` (called from
// up to `parallelism` threads at once) and checks every name expression
// lowered to a non-empty name, and to an entry point whose arguments are
// the ones the kernel's `signature` declares. Kernels named in `skip`
// (those with source findings, whose compile would only repeat them) are
// left out.
std::vector<Finding> CompileAll(const manifest::Resolver& resolver, const std::vector<std::string>& archs,
                                const CompileFunction& compile, size_t parallelism, const Progress& progress = {},
                                const std::set<std::string>& skip = {});

}  // namespace jitd::guard
