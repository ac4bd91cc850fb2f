// The fatbin container (jitd/fatbin.h). The writer lays entries out as CUDA
// 13.0's `fatbinary --compress=false` does; the reader checks every size
// against what remains before it reads what the size covers, so a truncated
// or damaged fatbin is an error and never a read out of bounds.
#include "jitd/fatbin.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <tuple>

#include "jitd/base/coding.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"

namespace jitd::fatbin {
namespace {

using text::Cat;

constexpr uint32_t kMagic = 0xBA55ED50;
constexpr uint16_t kVersion = 1;
constexpr size_t kFatHeaderBytes = 16;

constexpr uint16_t kKindPtx = 1;
constexpr uint16_t kKindElf = 2;
constexpr uint16_t kEntryVersion = 0x0101;  // what every entry of the tool's carries
constexpr size_t kEntryHeaderBytes = 64;
// The options area, right after the fixed header: u32 offset of its text,
// u32 length, the text.
constexpr uint32_t kOptionsAreaOffset = 64;
constexpr uint32_t kOptionsTextOffset = 72;

constexpr uint64_t kFlag64Bit = 0x1;
constexpr uint64_t kFlagLinux = 0x10;
constexpr uint64_t kFlagLz4 = 0x2000;
constexpr uint64_t kFlagZstd = 0x8000;
constexpr uint64_t kFlagArchSpecific = 0x100000;
constexpr uint64_t kFlagFamilySpecific = 0x200000;
// Set by the tool for a cubin whose e_flags carry bit 1 (see CudaElf).
constexpr uint64_t kFlagElfBit1 = 0x1000000;

constexpr int kMaxArch = 0xffff;
// Far above any real .nv.compat section (36 bytes in CUDA 13.0's cubins);
// it has to fit the entry header's u32 size with room to spare.
constexpr size_t kMaxCompatBytes = 1 << 20;

// ELF64: EM_CUDA, and the two OS/ABI values of CUDA ELFs. CUDA 13.0 writes
// 0x41, whose e_flags hold the SM in bits 8..23; with 0x33 (older
// toolkits') they hold it in bits 0..7. That is how the tool reads them: it
// refuses an `sm=` that does not match, and takes a cubin whose bits do.
constexpr std::string_view kElfMagic = "\177ELF";
constexpr uint16_t kEmCuda = 190;
constexpr uint8_t kOsAbiCudaOld = 0x33;
constexpr uint8_t kOsAbiCuda = 0x41;
constexpr uint32_t kShtNobits = 8;
constexpr size_t kElfHeaderBytes = 64;
constexpr size_t kSectionHeaderBytes = 64;
constexpr size_t kProgramHeaderBytes = 56;
constexpr std::string_view kCompatSection = ".nv.compat";

size_t Align8(size_t n) { return (n + 7) & ~size_t{7}; }

// Reads at `off`, which the caller has checked lies within `b`.
uint16_t U16(std::string_view b, size_t off) { return coding::DecodeFixed16(b.data() + off); }
uint32_t U32(std::string_view b, size_t off) { return coding::DecodeFixed32(b.data() + off); }
uint64_t U64(std::string_view b, size_t off) { return coding::DecodeFixed64(b.data() + off); }

// Whether [off, off + len) lies within `size` bytes, without overflow.
bool Fits(uint64_t off, uint64_t len, size_t size) { return off <= size && len <= size - off; }

// What a fatbin entry needs from a cubin's ELF.
struct CudaElf {
  int arch = 0;
  uint8_t abi_version = 0;  // e_ident[EI_ABIVERSION]: the entry's minor version
  uint8_t elf_version = 0;  // e_ident[EI_VERSION]: the entry's major version
  // e_flags bit 1 of a CUDA 13 (OS/ABI 0x41) ELF: set in its sm_100 and later
  // cubins. The tool then sets kFlagElfBit1 and copies `.nv.compat`.
  bool flag_bit1 = false;
  size_t end = 0;  // where its last header table or section ends
  bool has_compat = false;
  std::string_view compat;  // the `.nv.compat` section's bytes
};

absl::Status Bad(const std::string& what) { return absl::InvalidArgumentError(what); }

absl::Status ReadElfHeader(std::string_view elf, CudaElf* out) {
  if (elf.size() < kElfHeaderBytes) return Bad(Cat("not an ELF: ", elf.size(), " bytes, shorter than its header"));
  if (elf.substr(0, 4) != kElfMagic) return Bad("not an ELF: no \\x7fELF magic");
  if (elf[4] != 2 || elf[5] != 1) return Bad("not a 64-bit little-endian ELF");
  const uint8_t os_abi = static_cast<uint8_t>(elf[7]);
  if (U16(elf, 18) != kEmCuda) return Bad(Cat("not a CUDA ELF: e_machine ", U16(elf, 18), ", not EM_CUDA (190)"));
  if (os_abi != kOsAbiCuda && os_abi != kOsAbiCudaOld) {
    return Bad(Cat("not a CUDA ELF: OS/ABI ", static_cast<int>(os_abi), ", not 0x33 or 0x41"));
  }
  const uint32_t e_flags = U32(elf, 48);
  out->arch = static_cast<int>(os_abi == kOsAbiCuda ? (e_flags >> 8) & 0xffff : e_flags & 0xff);
  out->abi_version = static_cast<uint8_t>(elf[8]);
  out->elf_version = static_cast<uint8_t>(elf[6]);
  out->flag_bit1 = os_abi == kOsAbiCuda && (e_flags & 0x2) != 0;
  out->end = kElfHeaderBytes;
  return absl::OkStatus();
}

absl::Status ScanSegments(std::string_view elf, CudaElf* out) {
  const uint64_t phoff = U64(elf, 32);
  const uint16_t phnum = U16(elf, 56);
  if (phnum == 0) return absl::OkStatus();
  if (U16(elf, 54) != kProgramHeaderBytes) return Bad(Cat("e_phentsize ", U16(elf, 54), ", not 56"));
  if (!Fits(phoff, uint64_t{phnum} * kProgramHeaderBytes, elf.size())) {
    return Bad(Cat("program headers at ", phoff, " run past the end of the ELF (", elf.size(), " bytes)"));
  }
  out->end = std::max(out->end, static_cast<size_t>(phoff + phnum * kProgramHeaderBytes));
  for (size_t i = 0; i < phnum; ++i) {
    const size_t ph = phoff + i * kProgramHeaderBytes;
    const uint64_t off = U64(elf, ph + 8), len = U64(elf, ph + 32);
    if (len == 0) continue;
    if (!Fits(off, len, elf.size())) return Bad(Cat("segment ", i, " runs past the end of the ELF"));
    out->end = std::max(out->end, static_cast<size_t>(off + len));
  }
  return absl::OkStatus();
}

// The name of the section whose header is at `sh`, from the name table
// [names_off, names_off + names_len), which lies within `elf`.
std::string_view SectionName(std::string_view elf, size_t sh, uint64_t names_off, uint64_t names_len) {
  const uint32_t name = U32(elf, sh);
  if (name >= names_len) return {};
  std::string_view names = elf.substr(names_off, names_len);
  return names.substr(name, names.find('\0', name) - name);
}

// Section headers: their table and every section's bytes must lie within
// the ELF; finds `.nv.compat` by name, as the tool does.
absl::Status ScanSections(std::string_view elf, CudaElf* out) {
  const uint64_t shoff = U64(elf, 40);
  uint64_t shnum = U16(elf, 60);
  uint64_t shstrndx = U16(elf, 62);
  if (shoff == 0) return shnum == 0 ? absl::OkStatus() : Bad("section headers at offset 0");
  if (U16(elf, 58) != kSectionHeaderBytes) return Bad(Cat("e_shentsize ", U16(elf, 58), ", not 64"));
  if (!Fits(shoff, kSectionHeaderBytes, elf.size())) return Bad(Cat("section headers at ", shoff, " past the end"));
  if (shnum == 0) shnum = U64(elf, shoff + 32);             // more than 0xff00 sections: the count is in section 0
  if (shstrndx == 0xffff) shstrndx = U32(elf, shoff + 40);  // SHN_XINDEX: the index is in section 0
  if (shnum > (elf.size() - shoff) / kSectionHeaderBytes) {
    return Bad(Cat(shnum, " section headers at ", shoff, " run past the end of the ELF (", elf.size(), " bytes)"));
  }
  if (shstrndx >= shnum && shstrndx != 0) return Bad(Cat("section name table index ", shstrndx, " out of range"));
  out->end = std::max(out->end, static_cast<size_t>(shoff + shnum * kSectionHeaderBytes));
  for (uint64_t i = 0; i < shnum; ++i) {
    const size_t sh = shoff + i * kSectionHeaderBytes;
    const uint64_t off = U64(elf, sh + 24), len = U64(elf, sh + 32);
    if (U32(elf, sh + 4) == kShtNobits || len == 0) continue;
    if (!Fits(off, len, elf.size())) {
      return Bad(
          Cat("section ", i, " (", len, " bytes at ", off, ") runs past the end of the ELF (", elf.size(), " bytes)"));
    }
    out->end = std::max(out->end, static_cast<size_t>(off + len));
  }
  if (shstrndx == 0) return absl::OkStatus();
  const size_t names = shoff + shstrndx * kSectionHeaderBytes;
  const uint64_t names_off = U64(elf, names + 24), names_len = U64(elf, names + 32);
  if (U32(elf, names + 4) == kShtNobits || !Fits(names_off, names_len, elf.size())) return absl::OkStatus();
  for (uint64_t i = 1; i < shnum && !out->has_compat; ++i) {
    const size_t sh = shoff + i * kSectionHeaderBytes;
    if (SectionName(elf, sh, names_off, names_len) != kCompatSection) continue;
    const uint64_t off = U64(elf, sh + 24), len = U64(elf, sh + 32);
    if (!Fits(off, len, elf.size())) return Bad("the .nv.compat section runs past the end of the ELF");
    out->has_compat = true;
    out->compat = elf.substr(off, len);
  }
  return absl::OkStatus();
}

// What a fatbin needs of `elf`, which must be a CUDA ELF whose header
// tables and sections lie within it. INVALID_ARGUMENT says what is wrong.
absl::StatusOr<CudaElf> InspectCudaElf(std::string_view elf) {
  CudaElf out;
  JITD_RETURN_IF_ERROR(ReadElfHeader(elf, &out));
  JITD_RETURN_IF_ERROR(ScanSegments(elf, &out));
  JITD_RETURN_IF_ERROR(ScanSections(elf, &out));
  return out;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// A NUL ends PTX in the container, and a control character means it is not
// PTX at all (a cubin passed as PTX, say).
absl::Status CheckPtxText(std::string_view ptx) {
  for (size_t i = 0; i < ptx.size(); ++i) {
    const auto c = static_cast<unsigned char>(ptx[i]);
    if ((c < 0x20 && !IsSpace(ptx[i])) || c == 0x7f) {
      return Bad(Cat("PTX is not text: byte ", static_cast<int>(c), " at offset ", i));
    }
  }
  return absl::OkStatus();
}

// Parses the digits at `*pos` into `*value`: at least one, at most 0xffff.
bool ParseVersionNumber(std::string_view s, size_t* pos, uint16_t* value) {
  uint32_t v = 0;
  size_t digits = 0;
  for (; *pos < s.size() && IsDigit(s[*pos]) && digits < 6; ++*pos, ++digits)
    v = v * 10 + static_cast<uint32_t>(s[*pos] - '0');
  if (digits == 0 || v > 0xffff) return false;
  *value = static_cast<uint16_t>(v);
  return true;
}

// The PTX ISA version of the `.version M.m` directive that PTX must begin
// with (after comments and blank space): the entry's version field.
absl::Status ParsePtxVersion(std::string_view ptx, uint16_t* major, uint16_t* minor) {
  size_t pos = 0;
  while (pos < ptx.size()) {
    if (IsSpace(ptx[pos])) {
      ++pos;
    } else if (ptx.substr(pos, 2) == "//") {
      pos = std::min(ptx.find('\n', pos), ptx.size());
    } else if (ptx.substr(pos, 2) == "/*") {
      const size_t end = ptx.find("*/", pos + 2);
      if (end == std::string_view::npos) return Bad("PTX has an unterminated /* comment");
      pos = end + 2;
    } else {
      break;
    }
  }
  constexpr std::string_view kDirective = ".version";
  const auto bad = [&] { return Bad(Cat("PTX does not begin with a `.version M.m` directive (at offset ", pos, ")")); };
  if (ptx.substr(pos, kDirective.size()) != kDirective) return bad();
  pos += kDirective.size();
  if (pos >= ptx.size() || (ptx[pos] != ' ' && ptx[pos] != '\t')) return bad();
  while (pos < ptx.size() && (ptx[pos] == ' ' || ptx[pos] == '\t')) ++pos;
  if (!ParseVersionNumber(ptx, &pos, major) || pos >= ptx.size() || ptx[pos++] != '.') return bad();
  if (!ParseVersionNumber(ptx, &pos, minor)) return bad();
  return absl::OkStatus();
}

uint64_t VariantFlags(ArchVariant variant) {
  switch (variant) {
    case ArchVariant::kArchSpecific:
      return kFlagArchSpecific;
    case ArchVariant::kFamilySpecific:
      return kFlagFamilySpecific;
    case ArchVariant::kGeneric:
      break;
  }
  return 0;
}

// One entry as it will be written.
struct Entry {
  uint16_t kind = 0;
  uint16_t major = 0, minor = 0;
  uint32_t arch = 0;
  uint64_t flags = kFlag64Bit | kFlagLinux;
  bool has_options = false;
  std::string options_text;  // what follows the options area's 8 bytes
  uint32_t options_length = 0;
  std::string_view payload;
  bool nul_terminated = false;  // PTX: a NUL follows the text
};

std::string ImageLabel(size_t index, const Image& image) {
  return Cat("image ", index, " (", image.kind == ImageKind::kPtx ? "PTX " : "cubin ", TargetName(image), ")");
}

// Checks image `index` and plans its entry; INVALID_ARGUMENT names it.
absl::StatusOr<Entry> PlanEntry(size_t index, const Image& image) {
  const auto invalid = [&](const auto& what) {
    return absl::InvalidArgumentError(Cat("fatbin: ", ImageLabel(index, image), ": ", what));
  };
  if (image.arch < 1 || image.arch > kMaxArch) return invalid("arch outside 1..65535");
  if (image.bytes.empty()) return invalid("empty payload");
  Entry e;
  e.arch = static_cast<uint32_t>(image.arch);
  e.flags |= VariantFlags(image.variant);
  e.payload = image.bytes;
  if (image.kind == ImageKind::kPtx) {
    absl::Status s = CheckPtxText(image.bytes);
    if (s.ok()) s = ParsePtxVersion(image.bytes, &e.major, &e.minor);
    if (!s.ok()) return invalid(s.message());
    e.kind = kKindPtx;
    e.has_options = true;  // with no options: an empty, NUL-terminated text
    e.options_text.assign(1, '\0');
    e.nul_terminated = true;
    return e;
  }
  if (image.kind != ImageKind::kCubin) return invalid("unknown image kind");
  absl::StatusOr<CudaElf> elf = InspectCudaElf(image.bytes);
  if (!elf.ok()) return invalid(elf.status().message());
  if (elf->end != image.bytes.size()) {
    return invalid(Cat("the cubin is ", image.bytes.size(), " bytes, but its ELF headers and sections end at byte ",
                       elf->end, " (bytes after the ELF)"));
  }
  if (elf->arch != image.arch) return invalid(Cat("its ELF's e_flags are for sm_", elf->arch));
  if (elf->compat.size() > kMaxCompatBytes) return invalid("its .nv.compat section is over 1 MiB");
  e.kind = kKindElf;
  e.major = elf->elf_version;
  e.minor = elf->abi_version;
  if (elf->flag_bit1) e.flags |= kFlagElfBit1;
  if (elf->flag_bit1 && elf->has_compat) {
    e.has_options = true;
    e.options_text = Cat('\0', elf->compat);
    e.options_length = static_cast<uint32_t>(elf->compat.size());
  }
  return e;
}

void AppendEntry(std::string& out, const Entry& e) {
  const size_t header = e.has_options ? Align8(kOptionsTextOffset + e.options_text.size()) : kEntryHeaderBytes;
  const size_t payload = Align8(e.payload.size() + (e.nul_terminated ? 1 : 0));
  const size_t start = out.size();
  coding::PutFixed16(&out, e.kind);
  coding::PutFixed16(&out, kEntryVersion);
  coding::PutFixed32(&out, static_cast<uint32_t>(header));
  coding::PutFixed64(&out, payload);
  coding::PutFixed32(&out, 0);  // compressed size
  coding::PutFixed32(&out, e.has_options ? kOptionsAreaOffset : 0);
  coding::PutFixed16(&out, e.minor);
  coding::PutFixed16(&out, e.major);
  coding::PutFixed32(&out, e.arch);
  coding::PutFixed64(&out, 0);  // identifier offset and length
  coding::PutFixed64(&out, e.flags);
  coding::PutFixed64(&out, 0);
  coding::PutFixed64(&out, 0);  // uncompressed size
  if (e.has_options) {
    coding::PutFixed32(&out, kOptionsTextOffset);
    coding::PutFixed32(&out, e.options_length);
    out.append(e.options_text);
  }
  out.resize(start + header, '\0');
  out.append(e.payload);
  out.resize(start + header + payload, '\0');
}

absl::Status Corrupt(size_t offset, const std::string& what) {
  return absl::DataLossError(Cat("corrupt fatbin at offset ", offset, ": ", what));
}

absl::Status Unsupported(size_t offset, const std::string& what) {
  return absl::UnimplementedError(Cat("unsupported fatbin at offset ", offset, ": ", what));
}

// The payload at `payload_pos`, its entry's header checked by ReadEntry, into
// `image`: PTX up to its NUL, a cubin as long as its ELF headers say.
absl::Status ReadPayload(std::string_view payload, size_t payload_pos, bool is_ptx, Image* image) {
  if (is_ptx) {
    const size_t nul = payload.find('\0');
    if (nul == std::string_view::npos) return Corrupt(payload_pos, "PTX payload without its terminating NUL");
    if (nul == 0) return Corrupt(payload_pos, "empty PTX payload");
    image->kind = ImageKind::kPtx;
    image->bytes = payload.substr(0, nul);
    return absl::OkStatus();
  }
  absl::StatusOr<CudaElf> elf = InspectCudaElf(payload);
  if (!elf.ok()) return Corrupt(payload_pos, Cat("cubin payload: ", elf.status().message()));
  if (elf->arch != image->arch) {
    return Corrupt(payload_pos, Cat("entry for arch ", image->arch, " holds a cubin for sm_", elf->arch));
  }
  image->kind = ImageKind::kCubin;
  image->bytes = payload.substr(0, elf->end);
  return absl::OkStatus();
}

// The entry at `pos`, which lies before the end of `bytes`; `*next` is where
// the one after it begins.
absl::Status ReadEntry(std::string_view bytes, size_t pos, Image* image, size_t* next) {
  const size_t left = bytes.size() - pos;
  if (left < kEntryHeaderBytes) return Corrupt(pos, Cat("entry header truncated: ", left, " of 64 bytes"));
  const uint16_t kind = U16(bytes, pos);
  const uint32_t header = U32(bytes, pos + 4);
  const uint64_t payload = U64(bytes, pos + 8);
  const uint64_t flags = U64(bytes, pos + 40);
  if (header < kEntryHeaderBytes || header > left) {
    return Corrupt(pos, Cat("entry header size ", header, " outside 64..", left, " (what remains)"));
  }
  if (payload > left - header) {
    return Corrupt(pos, Cat("entry payload of ", payload, " bytes runs past the end (", left - header, " remain)"));
  }
  if (U16(bytes, pos + 2) != kEntryVersion) {
    return Corrupt(pos, Cat("entry header marked ", U16(bytes, pos + 2), ", not 0x0101: a damaged or misplaced entry"));
  }
  if (kind != kKindPtx && kind != kKindElf) {
    return Unsupported(pos, Cat("entry kind ", kind, " (jitd reads PTX, 1, and ELF, 2; 8 is LTO-IR)"));
  }
  if ((flags & kFlagZstd) != 0) return Unsupported(pos, "ZSTD-compressed entry");
  if ((flags & kFlagLz4) != 0) return Unsupported(pos, "LZ4-compressed entry");
  if (U32(bytes, pos + 16) != 0 || U64(bytes, pos + 56) != 0) return Unsupported(pos, "compressed entry");
  if ((flags & kFlag64Bit) == 0) return Unsupported(pos, "entry for a 32-bit host");
  if ((flags & kFlagArchSpecific) != 0 && (flags & kFlagFamilySpecific) != 0) {
    return Corrupt(pos, "entry both arch-specific and family-specific");
  }
  const uint32_t arch = U32(bytes, pos + 28);
  if (arch < 1 || arch > kMaxArch) return Corrupt(pos, Cat("entry arch ", arch, " outside 1..65535"));
  image->arch = static_cast<int>(arch);
  image->variant = (flags & kFlagArchSpecific) != 0     ? ArchVariant::kArchSpecific
                   : (flags & kFlagFamilySpecific) != 0 ? ArchVariant::kFamilySpecific
                                                        : ArchVariant::kGeneric;
  const size_t payload_pos = pos + header;
  *next = payload_pos + payload;
  return ReadPayload(bytes.substr(payload_pos, payload), payload_pos, kind == kKindPtx, image);
}

}  // namespace

std::string TargetName(const Image& image) {
  std::string name = Cat(image.kind == ImageKind::kPtx ? "compute_" : "sm_", image.arch);
  if (image.variant == ArchVariant::kArchSpecific) name += 'a';
  if (image.variant == ArchVariant::kFamilySpecific) name += 'f';
  return name;
}

absl::StatusOr<std::string> WriteFatbin(const std::vector<Image>& images) {
  if (images.empty()) return absl::InvalidArgumentError("fatbin: no images");
  std::vector<Entry> entries;
  entries.reserve(images.size());
  std::set<std::tuple<ImageKind, int, ArchVariant>> targets;
  size_t total = kFatHeaderBytes;
  for (size_t i = 0; i < images.size(); ++i) {
    const Image& image = images[i];
    if (!targets.emplace(image.kind, image.arch, image.variant).second) {
      return absl::InvalidArgumentError(Cat("fatbin: ", ImageLabel(i, image), ": a second image for its target"));
    }
    JITD_ASSIGN_OR_RETURN(Entry entry, PlanEntry(i, image));
    total += kOptionsTextOffset + entry.options_text.size() + entry.payload.size() + 16;  // with padding
    entries.push_back(std::move(entry));
  }
  std::string out;
  out.reserve(total);
  coding::PutFixed32(&out, kMagic);
  coding::PutFixed16(&out, kVersion);
  coding::PutFixed16(&out, static_cast<uint16_t>(kFatHeaderBytes));
  coding::PutFixed64(&out, 0);  // the entries' size, below
  for (const Entry& e : entries) AppendEntry(out, e);
  std::string size;
  coding::PutFixed64(&size, out.size() - kFatHeaderBytes);
  out.replace(8, 8, size);
  return out;
}

absl::StatusOr<std::vector<Image>> ReadFatbin(std::string_view bytes) {
  if (bytes.size() < kFatHeaderBytes) return Corrupt(0, Cat("header truncated: ", bytes.size(), " of 16 bytes"));
  if (U32(bytes, 0) != kMagic) return Corrupt(0, "no fatbin magic 0xBA55ED50");
  if (U16(bytes, 4) != kVersion) return Unsupported(4, Cat("container version ", U16(bytes, 4), ", not 1"));
  const uint16_t header = U16(bytes, 6);
  const uint64_t size = U64(bytes, 8);
  if (header < kFatHeaderBytes || header > bytes.size()) {
    return Corrupt(6, Cat("header size ", header, " outside 16..", bytes.size()));
  }
  if (size > bytes.size() - header) {
    return Corrupt(8, Cat("truncated: the header says ", header + size, " bytes, there are ", bytes.size()));
  }
  if (size < bytes.size() - header) {
    return Corrupt(header + size, Cat(bytes.size() - header - size, " bytes after the fatbin's end"));
  }
  if (size == 0) return Corrupt(8, "no entries");
  std::vector<Image> images;
  for (size_t pos = header; pos < bytes.size();) {
    Image image;
    size_t next = 0;
    JITD_RETURN_IF_ERROR(ReadEntry(bytes, pos, &image, &next));
    images.push_back(std::move(image));
    pos = next;
  }
  return images;
}

bool LooksLikeFatbin(std::string_view bytes) { return bytes.size() >= kFatHeaderBytes && U32(bytes, 0) == kMagic; }

}  // namespace jitd::fatbin
