// The namespace guard: proves, before any request is made, that every kernel
// jitd ships lives in its tree's namespace (kernels.toml `namespace`,
// "sglang" unless the tree says otherwise) and that every registered
// instantiation compiles and resolves. The one public header of `jitd_guard`.
//
// Three checks, each producing one Finding per problem:
//  * CheckSources (textual, milliseconds; the daemon runs it at start): every
//    file ScannedFiles names (each .cu/.cuda/.cuh/.h/.hpp file of the kernels
//    directory, registered in the manifest or not, and every file a kernel
//    can #include, whatever its name) holds at its top level nothing but
//    `namespace NS
//    { ... }` (or `namespace NS::x { ... }`; for a rule "team::ops" also
//    `namespace team { namespace ops { ... } }`), includes and macros aside;
//    and every manifest name expression starts with NS::. It names each way
//    a namespace migration misses code:
//      - a top-level anonymous namespace;
//      - a pseudo-namespace (`sglang_modulate_scale_shift`) never wrapped in
//        the namespace, or any other global declaration;
//      - `extern "C"`, at global scope or inside the namespace (a C name
//        is outside every namespace);
//      - a top-level `using namespace NS;` (what follows is still global);
//      - a #define that opens, closes or names a namespace, and its uses
//        (the scan skips preprocessor lines, so it cannot see through one);
//      - a primary class template at global scope that NS specialises.
//  * CheckTreesShareNoHeaders (textual, for several trees served together):
//    a header byte-identical in two trees and included by kernels of both.
//  * CompileAll (NVRTC, minutes; `jitd lint`, warm-up, CI): every manifest
//    instantiation for every arch compiles, each name expression lowers and
//    the module passes the module check.
//  * ModuleSymbolsOutside (the module check, microseconds; CompileAll and
//    every compile of the daemon): what NVRTC made of the sources. The
//    textual checks read text and can be misled (a preprocessor condition,
//    a digraph, a line splice); this one reads the compiled module's symbol
//    table, which no spelling of the sources can change, and is the one
//    that decides.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
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

// The files of the tree CheckSources reads, sorted: every .cu, .cuda, .cuh,
// .h and .hpp file, each kernel's source and every file of each kernel's
// include closure (keys::IncludeNames: what NVRTC is given, so no file a
// compile reads goes unscanned, whatever its extension).
std::vector<std::string> ScannedFiles(const manifest::KernelTree& tree);

// CheckSource over every scanned file of the tree against its manifest's
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

// The module check: every symbol a compiled module defines with external
// linkage (its entries, device functions and globals: a cubin's ELF symbol
// tables, or the `.visible`/`.weak` names of PTX for a virtual arch; see
// guard/module_symbols.h) must be an entity of namespace `ns` or of one
// inside it, as its Itanium mangling says (`_ZN6sglang...`; a local entity
// of a function in it counts). One line per symbol that is not ("it
// defines `k` with a C name (extern "C"), outside namespace sglang", or a
// mangled name elsewhere, demangled), or one line saying the module cannot
// be read (neither a cubin nor PTX, or a damaged ELF file). Empty: the
// module passes. No symbol is exempt: the
// shipped kernels' modules define only their own (tests/guard).
std::vector<std::string> ModuleSymbolsOutside(std::string_view module, std::string_view ns);

// The module check as a compile's answer: OK, or FAILED_PRECONDITION (what
// a compile failure is, CONTRACT.md) naming `kernel`, each symbol outside
// and the remedy. The daemon refuses such a module and never caches it.
absl::Status CheckModuleNamespace(std::string_view module, std::string_view ns, std::string_view kernel);

using CompileFunction = std::function<absl::StatusOr<compiler::CompileResult>(const compiler::CompileJob&)>;
// Called after each instantiation: (done, total, kernel, params, arch, ok).
using Progress = std::function<void(size_t, size_t, const std::string&, const std::string&, const std::string&, bool)>;

// "" when a kernel's declared signature (kernels.toml `signature`, or the
// entry point's own in `signatures`) passes what the compiled entry point
// with `lowered_name` takes, argument by argument (pointer or not, const,
// scalar width, struct by value); else what differs.
std::string SignatureMismatch(std::string_view declared, std::string_view lowered_name);

// Compiles every instantiation for every arch with `compile` (called from
// up to `parallelism` threads at once) and checks every name expression
// lowered to a non-empty name, and to an entry point whose arguments are
// the ones the kernel declares for it (KernelDef::SignatureOf), and that
// each module passes the module check (one finding per symbol outside).
// Kernels named in `skip` (those with source findings, whose compile would
// only repeat them) are left out.
std::vector<Finding> CompileAll(const manifest::Resolver& resolver, const std::vector<std::string>& archs,
                                const CompileFunction& compile, size_t parallelism, const Progress& progress = {},
                                const std::set<std::string>& skip = {});

}  // namespace jitd::guard
