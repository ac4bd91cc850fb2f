// The module check: the compiled module's external symbols against the
// tree's namespace rule.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

#include "guard/module_symbols.h"
#include "guard/namespace_guard.h"
#include "guard/namespace_scan.h"
#include "jitd/base/text.h"
#include "jitd/blob.h"
#include "jitd/fatbin.h"

namespace jitd::guard {
namespace {

using text::Cat;

// A symbol as a message may quote it: bytes outside printable ASCII (an ELF
// string table holds whatever it holds) as \xNN, and no longer than a line.
std::string Quoted(std::string_view s) {
  std::string out;
  for (const char c : s.substr(0, 300)) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7f) {
      out.push_back(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", b);
      out += hex;
    }
  }
  return s.size() > 300 ? Cat(out, "...") : out;
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The two kinds of symbol ptxas itself adds to a cubin, seen in the
// modules of every shipped kernel (tests/guard): neither can come from a
// source, and neither is an entry a client could look up.
//  - `$__internal_<n>_$__cuda_<routine>`, a weak function: a copy of a
//    compiler routine (64-bit division, slow-path float division) in the
//    kernel's text. '$' is not an identifier character for NVRTC ("unrecognized
//    token") and an asm label does not rename a symbol, so no declaration
//    spells it.
//  - `__nv_reservedSMEM_offset_<n>_alias`, of no type (STT_NOTYPE): the
//    alias of a reserved shared-memory offset. A declaration's symbol is a
//    function or a variable, never untyped.
bool AddedByPtxas(const detail::ModuleSymbol& s) {
  using K = detail::ModuleSymbol::Kind;
  std::string_view n = s.name;
  if (s.kind == K::kFunction && s.binding == detail::ModuleSymbol::Binding::kWeak && n.starts_with("$__internal_")) {
    n.remove_prefix(12);
    const size_t sep = n.find("_$__cuda_");
    if (sep == std::string_view::npos || !AllDigits(n.substr(0, sep))) return false;
    const std::string_view routine = n.substr(sep + 9);
    return !routine.empty() && std::all_of(routine.begin(), routine.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    });
  }
  if (s.kind == K::kOther && n.starts_with("__nv_reservedSMEM_offset_") && n.ends_with("_alias")) {
    return AllDigits(n.substr(25, n.size() - 25 - 6));
  }
  return false;
}

// What a host shared object may define outside the namespace: weak and
// unique symbols (inline functions, inline variables and template
// instantiations of the headers it includes, tvm-ffi's, CCCL's and the
// standard library's, merged at load time), the
// unit's exports (__tvm_ffi_<name>, C names the generated unit declares
// inside the namespace) and what the linker adds.
bool AllowedInSharedObject(const detail::ModuleSymbol& s) {
  if (s.binding == detail::ModuleSymbol::Binding::kWeak || s.unique) return true;
  const std::string_view n = s.name;
  return n.starts_with("__tvm_ffi_") || n == "_init" || n == "_fini" || n == "_edata" || n == "_end" ||
         n == "__bss_start";
}

// The finding for `s`, defined outside namespace `rule` (`where`: "" for
// the module itself, "its device code for sm_90a: " for an embedded image).
std::string Outside(const detail::ModuleSymbol& s, const detail::Rule& rule, const std::string& where) {
  const char* linkage = s.kind == detail::ModuleSymbol::Kind::kEntry ? "kernel " : "";
  if (!s.name.starts_with("_Z")) {
    return Cat(where, "it defines ", linkage, "`", Quoted(s.name), "` with a C name (extern \"C\"), outside namespace ",
               rule.name);
  }
  return Cat(where, "it defines ", linkage, "`", Quoted(detail::Demangle(s.name)), "` (", Quoted(s.name),
             ") outside namespace ", rule.name);
}

// The device code a host shared object embeds (nvcc's .nv_fatbin: one
// fatbin per translation unit, each 8-byte aligned), each cubin and PTX
// image held to the rule as an NVRTC module is: a kernel or device symbol
// outside the namespace (the incident's kernel in an anonymous namespace,
// which the host side keeps local) is a finding there too.
void DeviceCodeOutside(std::string_view so, const detail::Rule& rule, std::vector<std::string>& out) {
  absl::StatusOr<std::string_view> section = detail::ElfSection(so, ".nv_fatbin");
  if (!section.ok()) return;  // no device code
  for (std::string_view rest = *section; !rest.empty();) {
    if (rest.front() == '\0') {  // padding between fatbins
      rest.remove_prefix(1);
      continue;
    }
    if (!fatbin::LooksLikeFatbin(rest)) {
      out.push_back(
          Cat("its device code (.nv_fatbin) cannot be read: no fatbin at byte ", section->size() - rest.size()));
      return;
    }
    uint64_t header = 0;
    for (int i = 0; i < 8; ++i) header |= static_cast<uint64_t>(static_cast<uint8_t>(rest[8 + i])) << (8 * i);
    const uint64_t length = 16 + std::min<uint64_t>(header, rest.size());
    absl::StatusOr<std::vector<fatbin::Image>> images = fatbin::ReadFatbin(rest.substr(0, length));
    if (!images.ok()) {
      out.push_back(Cat("its device code (.nv_fatbin) cannot be read: ", images.status().message()));
      return;
    }
    for (const fatbin::Image& image : *images) {
      const std::string where = Cat("its device code for ", fatbin::TargetName(image), ": ");
      absl::StatusOr<std::vector<detail::ModuleSymbol>> symbols = detail::ModuleExternalSymbols(image.bytes);
      if (!symbols.ok()) {
        out.push_back(Cat(where, "it cannot be read: ", symbols.status().message()));
        continue;
      }
      for (const detail::ModuleSymbol& s : *symbols) {
        if (!detail::MangledInNamespace(s.name, rule.parts) && !AddedByPtxas(s)) out.push_back(Outside(s, rule, where));
      }
    }
    rest.remove_prefix(std::min<uint64_t>(length, rest.size()));
  }
}

}  // namespace

std::vector<std::string> ModuleSymbolsOutside(std::string_view module, std::string_view ns) {
  const absl::StatusOr<std::vector<detail::ModuleSymbol>> symbols = detail::ModuleExternalSymbols(module);
  if (!symbols.ok()) return {Cat("it cannot be read: ", symbols.status().message())};
  const detail::Rule rule = detail::ParseRule(ns);
  const bool shared_object = cache::IsHostSharedObject(module);
  std::vector<std::string> out;
  std::set<std::string> seen;  // a shared object lists a symbol in .symtab and .dynsym
  for (const detail::ModuleSymbol& s : *symbols) {
    if (detail::MangledInNamespace(s.name, rule.parts) || AddedByPtxas(s)) continue;
    if (shared_object && (AllowedInSharedObject(s) || !seen.insert(s.name).second)) continue;
    out.push_back(Outside(s, rule, ""));
  }
  if (shared_object) DeviceCodeOutside(module, rule, out);
  return out;
}

absl::Status CheckModuleNamespace(std::string_view module, std::string_view ns, std::string_view kernel) {
  const std::vector<std::string> outside = ModuleSymbolsOutside(module, ns);
  if (outside.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      Cat("kernel ", kernel, ": the namespace guard refuses its compiled module: ", text::Join(outside, "; "),
          " (declare every kernel, device function and global in namespace ", ns,
          ", without extern \"C\": a name expression finds it there; `jitd lint` shows it before serving)"));
}

}  // namespace jitd::guard
