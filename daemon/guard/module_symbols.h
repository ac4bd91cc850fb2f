// What a compiled module gives other code to link against, internal to
// jitd_guard (namespace_guard.h's module check is the public face; tests
// and the fuzzer call these directly). A cubin is an ELF64 file, read here
// by a small bounds-checked reader of its symbol tables; the PTX of a
// compile for a virtual arch is read by its linkage directives.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace jitd::guard::detail {

struct ModuleSymbol {
  enum class Binding { kLocal, kGlobal, kWeak };
  enum class Kind { kEntry, kFunction, kVariable, kOther };
  std::string name;  // as the module spells it: Itanium-mangled, or a C name
  Binding binding = Binding::kGlobal;
  Kind kind = Kind::kOther;
  // STB_GNU_UNIQUE (binding kGlobal): an inline variable or a template's
  // static member, one per process however many objects define it, as
  // a weak symbol is.
  bool unique = false;
  bool operator==(const ModuleSymbol&) const = default;
};

// What a module offers by name: from every SHT_SYMTAB and SHT_DYNSYM
// section of an ELF64 little-endian file (a cubin), each defined symbol
// (section index not SHN_UNDEF) of binding STB_GLOBAL, STB_WEAK or
// STB_GNU_UNIQUE (kGlobal for the last), and each kernel entry (STT_FUNC
// with st_other's STO_CUDA_ENTRY bit, 0x10) whatever its binding: a
// `static __global__` kernel is local to the module's linking and still
// launchable by name. Section and file symbols and other local ones (the
// file-scope constants CCCL leaves in every module) are left out. Kinds:
// an entry, another function, a variable (STT_OBJECT, or CUDA's 13 for a
// -rdc global), or other (STT_NOTYPE...). Any bytes may be passed: every
// offset, size and name is checked against `elf`, and INVALID_ARGUMENT says
// what does not fit (a truncated or mutated file never reads out of
// bounds). Reads the section headers and the symbol tables once:
// microseconds for a cubin.
absl::StatusOr<std::vector<ModuleSymbol>> ElfExternalSymbols(std::string_view elf);

// The same of PTX text (the answer for a virtual arch): each `.visible`
// (kGlobal), `.weak` or `.common` (kWeak) declaration of an `.entry`, a
// `.func` or a variable (`.global`, `.const`, ...), and each `.entry`
// without one (kLocal). `.extern` declarations are uses, not definitions;
// a function or variable without a linkage directive is local to the
// module. Comments are skipped.
std::vector<ModuleSymbol> PtxExternalSymbols(std::string_view ptx);

// The bytes of the section named `name` of the 64-bit little-endian ELF
// `elf` (".nv_fatbin": the device code nvcc embeds in a host object),
// bounds-checked as ElfExternalSymbols reads; NOT_FOUND when it has none.
absl::StatusOr<std::string_view> ElfSection(std::string_view elf, std::string_view name);

// By the module's first bytes: the ELF magic is a cubin, `//` or `.version`
// (after blanks) is PTX; anything else (a fatbin, garbage) is
// INVALID_ARGUMENT.
absl::StatusOr<std::vector<ModuleSymbol>> ModuleExternalSymbols(std::string_view module);

// Whether the Itanium-mangled `symbol` names an entity declared inside the
// namespace `parts` ({"team", "ops"} for team::ops) or one nested in it. Read
// from the mangling, not from the demangled text (a function template's
// demangled name starts with its return type): after `_Z`, an optional
// special-name prefix (guard variable `GV`, vtable/typeinfo `TV`/`TI`/`TS`/
// `TT`, TLS `TH`/`TW`, thunks `Th`/`Tv`), then either a local name
// (`Z <encoding> E ...`: an entity inside a function, in the namespace when
// the function is) or a nested name `N [rVK] [RO]` whose first source names
// are the parts. Anything else (an unscoped name, `St`, an unmangled C
// name) is not in it.
bool MangledInNamespace(std::string_view symbol, const std::vector<std::string>& parts);

// abi::__cxa_demangle of `symbol`, or `symbol` itself when it does not
// demangle (a C name).
std::string Demangle(std::string_view symbol);

}  // namespace jitd::guard::detail
