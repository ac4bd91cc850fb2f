// CUDA fatbins: one image that holds SASS (cubins) for several GPU
// architectures and PTX for the ones after them, which cuModuleLoadData and
// cuModuleLoadFatBinary take as they are: the driver loads the cubin for the
// device's architecture, or JIT-compiles the PTX when no cubin fits. The
// one public header of `jitd_fatbin`, which writes and reads the container
// itself and links no NVIDIA library (no `fatbinary`, no libnvfatbin).
//
// The layout, little-endian, as CUDA 13.0's `fatbinary --compress=false`
// writes it (established by comparing with its output byte for byte; see
// tests/cache/fixtures/fatbin/README.md):
//
//   fatbin header, 16 bytes
//     u32 magic 0xBA55ED50, u16 version 1, u16 header size 16,
//     u64 size of the entries that follow
//   entries, back to back, each an entry header then its payload:
//     +0  u16 kind: 1 PTX, 2 ELF (cubin)
//     +2  u16 0x0101, in every entry of every kind the tool writes (the
//         reader takes any other value for a damaged or misplaced entry)
//     +4  u32 header size: 64, or more where areas follow the 64 bytes
//     +8  u64 payload size, a multiple of 8 (zero padding)
//     +16 u32 compressed size, 0 when stored as is
//     +20 u32 offset of the options area in the header, 0 for none
//     +24 u16 minor, u16 major: the PTX ISA version of `.version M.m`; for a
//         cubin its ELF's EI_ABIVERSION and EI_VERSION bytes ("1.8")
//     +28 u32 arch: 90 for sm_90, compute_90, sm_90a, sm_100f
//     +32 u32 offset, u32 length of an identifier string (`fatbinary
//         --ident`; 0, 0 here)
//     +40 u64 flags: 0x1 64-bit, 0x2 debug, 0x10 Linux host, 0x2000 LZ4
//         and 0x8000 ZSTD compressed, 0x100000 arch-specific ("sm_90a"),
//         0x200000 family-specific ("sm_100f"), 0x1000000 a cubin whose
//         e_flags carry bit 1 (CUDA 13's sm_100 and later cubins)
//     +48 u64 0
//     +56 u64 uncompressed size, 0 when stored as is
//     options area (at +64): u32 offset of its text (72), u32 length, then
//         the text. A PTX entry always has one, with no text: 80 bytes of
//         header. A cubin whose e_flags carry bit 1 has one when its ELF
//         has a `.nv.compat` section: the length is the section's size and
//         the text a zero byte then the section's bytes. The header is zero
//         padded to a multiple of 8.
//   PTX payload: the text, a NUL, zeros to a multiple of 8.
//   Cubin payload: the ELF, zeros to a multiple of 8.
//
// What the tool does that WriteFatbin does not: it strips comments and
// indentation from PTX (WriteFatbin stores PTX as given: the driver reads
// either), it takes two images of one target (WriteFatbin refuses them),
// and it reads the PTX version from the first `.version` in the text even
// inside a comment (WriteFatbin skips comments). Given the PTX that the
// tool stored, WriteFatbin's output equals the tool's byte for byte.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace jitd::fatbin {

enum class ImageKind { kPtx, kCubin };

// The suffix of a target. The container marks it with a flag of the entry
// (arch stays the number), as the tool does for `--image3=...,sm=90a`:
// cuobjdump lists such an entry as "sm_90a". The ELF is not consulted: a
// cubin's e_flags are the same for sm_100 and sm_100a.
enum class ArchVariant {
  kGeneric,         // sm_90, compute_90
  kArchSpecific,    // sm_90a, compute_100a: flag 0x100000
  kFamilySpecific,  // sm_100f, compute_100f: flag 0x200000
};

struct Image {
  ImageKind kind = ImageKind::kCubin;
  int arch = 0;       // 90 for sm_90 / compute_90 / sm_90a
  std::string bytes;  // the PTX text (no NUL) or the cubin's ELF
  ArchVariant variant = ArchVariant::kGeneric;
  bool operator==(const Image&) const = default;
};

// "sm_90a" for a cubin, "compute_80" for PTX: the target an image is for.
std::string TargetName(const Image& image);

// The fatbin of `images`, in their order, uncompressed, as for a 64-bit
// Linux host. INVALID_ARGUMENT, naming the image, for: no images, an empty
// payload, an arch outside 1..65535, two images of one kind and target
// (kind, arch and variant), PTX that is not text (a NUL or a control
// character) or that does not begin with `.version M.m`, and a cubin that
// is not a 64-bit little-endian CUDA ELF (EM_CUDA, OS/ABI 0x33 or 0x41),
// whose headers or sections run past its end or that has bytes after them,
// or whose e_flags name another arch than `arch`.
absl::StatusOr<std::string> WriteFatbin(const std::vector<Image>& images);

// The images of a fatbin, in their order: the inverse of WriteFatbin, and it
// reads the tool's uncompressed fatbins too (their identifier and options
// areas are skipped; PTX comes back as the tool stored it). A cubin comes
// back as long as its ELF headers say, without the padding. Every length is
// checked against what is there first. Errors, each naming the byte offset:
//   DATA_LOSS      not a fatbin, truncated, trailing bytes, an entry whose
//                  sizes run past the end, no entries, PTX without its NUL,
//                  a cubin that is not a CUDA ELF
//   UNIMPLEMENTED  well formed but not what jitd writes: another container
//                  version, a compressed entry (LZ4 or ZSTD), an entry kind
//                  other than PTX and ELF, an entry for a 32-bit host
absl::StatusOr<std::vector<Image>> ReadFatbin(std::string_view bytes);

// Whether `bytes` could be a fatbin: at least its 16 header bytes, starting
// with the magic (nothing else is checked). How to tell a fatbin from a bare
// cubin or PTX.
bool LooksLikeFatbin(std::string_view bytes);

}  // namespace jitd::fatbin
