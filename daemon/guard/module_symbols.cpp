// The symbol tables of compiled modules: ELF64 (cubins) and PTX text.
#include "guard/module_symbols.h"

#include <cxxabi.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "jitd/base/text.h"

namespace jitd::guard::detail {
namespace {

using text::Cat;

// ELF64 layout (the System V gABI): header, section header and symbol sizes,
// and the fields read here.
constexpr std::string_view kElfMagic(
    "\x7f"
    "ELF",
    4);
constexpr uint64_t kElfHeaderSize = 64;
constexpr uint64_t kSectionHeaderSize = 64;
constexpr uint64_t kSymbolSize = 24;
constexpr uint32_t kShtSymtab = 2;
constexpr uint32_t kShtStrtab = 3;
constexpr uint32_t kShtDynsym = 11;
constexpr uint16_t kShnUndef = 0;
constexpr uint8_t kStbGlobal = 1;
constexpr uint8_t kStbWeak = 2;
constexpr uint8_t kStbGnuUnique = 10;
constexpr uint8_t kStbLocal = 0;
constexpr uint8_t kSttObject = 1;
constexpr uint8_t kSttFunc = 2;
constexpr uint8_t kSttSection = 3;
constexpr uint8_t kSttFile = 4;
// CUDA's own values, as cubins carry them (cuobjdump -elf): a -rdc global
// variable's type, and the st_other bit of a kernel entry.
constexpr uint8_t kSttCudaObject = 13;
constexpr uint8_t kStoCudaEntry = 0x10;

absl::Status NotElf(const std::string& what) {
  return absl::InvalidArgumentError(Cat("not a readable ELF64 module: ", what));
}

// Little-endian unsigned of `n` bytes at `off`; the caller checked the range.
uint64_t Le(std::string_view b, uint64_t off, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(b[off + i])) << (8 * i);
  return v;
}

// Whether [off, off + len) lies inside `b`, without overflowing.
bool Fits(std::string_view b, uint64_t off, uint64_t len) { return off <= b.size() && len <= b.size() - off; }

struct Section {
  uint32_t type = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t link = 0;
  uint64_t entsize = 0;
};

Section SectionAt(std::string_view elf, uint64_t header) {
  return {static_cast<uint32_t>(Le(elf, header + 4, 4)), Le(elf, header + 24, 8), Le(elf, header + 32, 8),
          static_cast<uint32_t>(Le(elf, header + 40, 4)), Le(elf, header + 56, 8)};
}

// <source-name> ::= <positive length number> <identifier>, at `p`.
bool SourceName(std::string_view s, size_t& p, std::string_view* out) {
  if (p >= s.size() || s[p] < '1' || s[p] > '9') return false;
  size_t n = 0;
  while (p < s.size() && s[p] >= '0' && s[p] <= '9') {
    n = n * 10 + static_cast<size_t>(s[p] - '0');
    if (n > s.size()) return false;
    ++p;
  }
  if (n > s.size() - p) return false;
  *out = s.substr(p, n);
  p += n;
  return true;
}

// [n] <number> `_`: a thunk's call offset, at `p`.
bool CallOffset(std::string_view s, size_t& p) {
  if (p < s.size() && s[p] == 'n') ++p;
  const size_t digits = p;
  while (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p]))) ++p;
  if (p == digits || p >= s.size() || s[p] != '_') return false;
  ++p;
  return true;
}

// The <name> at `p` (of an encoding, or of a class type) is in `parts`.
// Local names nest (an entity inside a function inside a function), at
// most a few levels in real code; deeper is refused rather than followed.
bool NameInNamespace(std::string_view s, size_t p, const std::vector<std::string>& parts, int depth) {
  if (depth > 16 || p >= s.size()) return false;
  if (s[p] == 'Z') return NameInNamespace(s, p + 1, parts, depth + 1);  // Z <function encoding> E <entity>
  if (s[p] != 'N') return false;
  ++p;
  while (p < s.size() && (s[p] == 'r' || s[p] == 'V' || s[p] == 'K')) ++p;
  if (p < s.size() && (s[p] == 'R' || s[p] == 'O')) ++p;
  for (const std::string& part : parts) {
    std::string_view got;
    if (!SourceName(s, p, &got) || got != part) return false;
  }
  return true;
}

bool IsPtxNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '%'; }

// PTX without its comments (`//` to the end of the line, `/* */`), spaces
// in their place.
std::string WithoutComments(std::string_view ptx) {
  std::string out(ptx);
  for (size_t i = 0; i + 1 < out.size(); ++i) {
    if (out[i] == '/' && out[i + 1] == '/') {
      while (i < out.size() && out[i] != '\n') out[i++] = ' ';
    } else if (out[i] == '/' && out[i + 1] == '*') {
      const size_t end = out.find("*/", i + 2);
      const size_t stop = end == std::string::npos ? out.size() : end + 2;
      for (; i < stop; ++i) {
        if (out[i] != '\n') out[i] = ' ';
      }
      --i;
    }
  }
  return out;
}

// PTX as tokens: names and directives (`.entry`, `_Z3foov`, `$str`,
// numbers) and single punctuation characters.
std::vector<std::string_view> PtxTokens(std::string_view code) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < code.size()) {
    const char c = code[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '.' || IsPtxNameChar(c)) {
      size_t end = i + 1;
      while (end < code.size() && IsPtxNameChar(code[end])) ++end;
      out.push_back(code.substr(i, end - i));
      i = end;
    } else {
      out.push_back(code.substr(i, 1));
      ++i;
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string_view> ElfSection(std::string_view elf, std::string_view name) {
  if (elf.size() < kElfHeaderSize || !elf.starts_with(kElfMagic) || elf[4] != 2 || elf[5] != 1) {
    return NotElf("not a 64-bit little-endian ELF");
  }
  const uint64_t shoff = Le(elf, 40, 8), shentsize = Le(elf, 58, 2), shnum = Le(elf, 60, 2);
  const uint64_t shstrndx = Le(elf, 62, 2);
  if (shoff == 0 || shentsize < kSectionHeaderSize || shnum == 0 || shnum > elf.size() / shentsize ||
      !Fits(elf, shoff, shnum * shentsize) || shstrndx >= shnum) {
    return NotElf("no section headers to read");
  }
  const Section names = SectionAt(elf, shoff + shstrndx * shentsize);
  if (!Fits(elf, names.offset, names.size)) return NotElf("section names past the end");
  const std::string_view table = elf.substr(names.offset, names.size);
  for (uint64_t i = 0; i < shnum; ++i) {
    const uint64_t header = shoff + i * shentsize;
    const uint64_t at = Le(elf, header, 4);
    if (at >= table.size()) continue;
    const size_t end = table.find('\0', at);
    if (end == std::string_view::npos || table.substr(at, end - at) != name) continue;
    const Section section = SectionAt(elf, header);
    if (!Fits(elf, section.offset, section.size)) return NotElf(Cat("section ", name, " past the end"));
    return elf.substr(section.offset, section.size);
  }
  return absl::NotFoundError(Cat("no section ", name));
}

absl::StatusOr<std::vector<ModuleSymbol>> ElfExternalSymbols(std::string_view elf) {
  if (elf.size() < kElfHeaderSize || !elf.starts_with(kElfMagic)) return NotElf("no ELF header");
  if (elf[4] != 2) return NotElf(Cat("class ", static_cast<int>(elf[4]), ", not ELFCLASS64"));
  if (elf[5] != 1) return NotElf("not little-endian");
  const uint64_t shoff = Le(elf, 40, 8);
  const uint64_t shentsize = Le(elf, 58, 2);
  uint64_t shnum = Le(elf, 60, 2);
  if (shoff == 0) return NotElf("no section headers, so no symbol table");
  if (shentsize < kSectionHeaderSize) return NotElf(Cat("section header size ", shentsize, " < 64"));
  if (shnum == 0) {  // extended numbering: the count is section 0's sh_size
    if (!Fits(elf, shoff, kSectionHeaderSize)) return NotElf("section headers past the end");
    shnum = Le(elf, shoff + 32, 8);
  }
  if (shnum > elf.size() / shentsize || !Fits(elf, shoff, shnum * shentsize)) {
    return NotElf(Cat(shnum, " section headers at ", shoff, " past the end (", elf.size(), " bytes)"));
  }
  std::vector<ModuleSymbol> out;
  bool any_table = false;
  for (uint64_t i = 0; i < shnum; ++i) {
    const Section table = SectionAt(elf, shoff + i * shentsize);
    if (table.type != kShtSymtab && table.type != kShtDynsym) continue;
    any_table = true;
    if (table.entsize < kSymbolSize) return NotElf(Cat("symbol table ", i, ": entry size ", table.entsize, " < 24"));
    if (!Fits(elf, table.offset, table.size)) return NotElf(Cat("symbol table ", i, " past the end"));
    if (table.link >= shnum) return NotElf(Cat("symbol table ", i, ": string table ", table.link, " does not exist"));
    const Section strings = SectionAt(elf, shoff + table.link * shentsize);
    if (strings.type != kShtStrtab || !Fits(elf, strings.offset, strings.size)) {
      return NotElf(Cat("symbol table ", i, ": section ", table.link, " is not a string table inside the file"));
    }
    const std::string_view names = elf.substr(strings.offset, strings.size);
    for (uint64_t k = 0; k < table.size / table.entsize; ++k) {
      const uint64_t sym = table.offset + k * table.entsize;  // + 24 <= offset + size: inside the file
      const auto info = static_cast<uint8_t>(elf[sym + 4]);
      const auto bind = static_cast<uint8_t>(info >> 4);
      const auto type = static_cast<uint8_t>(info & 0xf);
      const bool entry = type == kSttFunc && (static_cast<uint8_t>(elf[sym + 5]) & kStoCudaEntry) != 0;
      const auto shndx = static_cast<uint16_t>(Le(elf, sym + 6, 2));
      const bool external = bind == kStbGlobal || bind == kStbWeak || bind == kStbGnuUnique;
      if (!external && !entry) continue;
      if (shndx == kShnUndef || type == kSttSection || type == kSttFile) continue;
      const uint64_t name = Le(elf, sym, 4);
      const size_t end = name < names.size() ? names.find('\0', name) : std::string_view::npos;
      if (end == std::string_view::npos) {
        return NotElf(Cat("symbol ", k, " of table ", i, ": name at ", name, " not inside its string table"));
      }
      using B = ModuleSymbol::Binding;
      using K = ModuleSymbol::Kind;
      out.push_back({std::string(names.substr(name, end - name)),
                     bind == kStbLocal  ? B::kLocal
                     : bind == kStbWeak ? B::kWeak
                                        : B::kGlobal,
                     entry                                          ? K::kEntry
                     : type == kSttFunc                             ? K::kFunction
                     : type == kSttObject || type == kSttCudaObject ? K::kVariable
                                                                    : K::kOther,
                     bind == kStbGnuUnique});
    }
  }
  if (!any_table) return NotElf("no symbol table");
  return out;
}

std::vector<ModuleSymbol> PtxExternalSymbols(std::string_view ptx) {
  using B = ModuleSymbol::Binding;
  using K = ModuleSymbol::Kind;
  const std::string code = WithoutComments(ptx);
  const std::vector<std::string_view> t = PtxTokens(code);
  std::vector<ModuleSymbol> out;
  for (size_t i = 0; i < t.size(); ++i) {
    const bool linkage = t[i] == ".visible" || t[i] == ".weak" || t[i] == ".common";
    if (!linkage && t[i] != ".entry") continue;
    // An `.entry` right after its linkage directive was counted with it.
    if (!linkage && i > 0 && (t[i - 1] == ".visible" || t[i - 1] == ".weak" || t[i - 1] == ".common")) continue;
    ModuleSymbol symbol;
    symbol.binding = !linkage ? B::kLocal : t[i] == ".visible" ? B::kGlobal : B::kWeak;
    symbol.kind = K::kVariable;
    // The name is the first token that is neither a directive nor a number;
    // a function's return parameters, `.func (.param .b32 r) name(`, come
    // before it.
    for (size_t k = linkage ? i + 1 : i; k < t.size(); ++k) {
      if (t[k] == ".entry") symbol.kind = K::kEntry;
      if (t[k] == ".func") symbol.kind = K::kFunction;
      if (t[k] == "(" && t[k - 1] == ".func") {
        while (k < t.size() && t[k] != ")") ++k;
        continue;
      }
      if (t[k].front() == '.' || std::isdigit(static_cast<unsigned char>(t[k].front()))) continue;
      if (IsPtxNameChar(t[k].front())) {
        symbol.name = std::string(t[k]);
        out.push_back(std::move(symbol));
      }
      i = k;
      break;
    }
  }
  return out;
}

absl::StatusOr<std::vector<ModuleSymbol>> ModuleExternalSymbols(std::string_view module) {
  if (module.starts_with(kElfMagic)) return ElfExternalSymbols(module);
  const size_t first = module.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && (module.substr(first, 2) == "//" || module.substr(first, 8) == ".version")) {
    return PtxExternalSymbols(module);
  }
  return absl::InvalidArgumentError("neither a cubin (ELF) nor PTX text");
}

bool MangledInNamespace(std::string_view s, const std::vector<std::string>& parts) {
  if (!s.starts_with("_Z")) return false;
  size_t p = 2;
  const std::string_view special = s.substr(p, 2);
  if (special == "GV" || special == "TH" || special == "TW" || special == "TV" || special == "TI" || special == "TS" ||
      special == "TT") {
    p += 2;  // a guard variable, TLS init or wrapper, vtable, VTT or typeinfo of what follows
  } else if (special == "Th") {
    p += 2;
    if (!CallOffset(s, p)) return false;
  } else if (special == "Tv") {
    p += 2;
    if (!CallOffset(s, p) || !CallOffset(s, p)) return false;
  }
  return NameInNamespace(s, p, parts, 0);
}

std::string Demangle(std::string_view symbol) {
  // The demangler recurses on the mangling; a name longer than any real one
  // is shown as it is.
  if (symbol.size() > 4096) return std::string(symbol);
  const std::string name(symbol);
  int status = 0;
  char* demangled = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && demangled != nullptr ? std::string(demangled) : name;
  std::free(demangled);
  return out;
}

}  // namespace jitd::guard::detail
