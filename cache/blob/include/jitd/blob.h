// jitd's blob files: the one public header of the `jitd_blob` library, the
// format that a cache directory's files are written in and that every
// reader of them (the cache, the client's fallback, the client reading a
// blob by path) decodes and verifies. It depends on jitd_base and abseil
// alone, so the client library decodes blobs without linking the cache.
//
//   "JITDBLOB"                 8 bytes magic
//   u32 format version         little-endian
//   fields                     u16 tag, u32 length, `length` bytes; any order,
//                              unknown tags skipped (forward compatibility)
//   END field                  tag 0xFFFF, length 16, XXH3-128 of every byte
//                              before it, most significant byte first
//
// A blob describes itself completely (key, kernel, params, arch, options,
// symbols, log, cubin), so that an index lost to corruption can be rebuilt
// from the blob files alone. Its file in a cache directory is
// blobs/KK/KEY-CHECKSUM (BlobFileRelativePath).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace jitd::cache {

// An entry point of a cubin: the name expression it was compiled for and
// the lowered (mangled) name that cuModuleGetFunction takes.
struct Symbol {
  std::string name_expression;
  std::string lowered_name;
  bool operator==(const Symbol&) const = default;
};

// Everything about a cubin except its bytes. Stored inside the blob (so an
// index can be rebuilt from blobs alone) and, in part, in the index.
struct EntryMeta {
  std::string key;                   // hex content key; [0-9a-f]{16,128}
  std::string kernel;                // manifest name, "diffusion.modulate_scale_shift"
  std::string params;                // canonical "k=v,k=v" (sorted by k)
  std::string arch;                  // "sm_90", "sm_100a", ...
  std::vector<std::string> options;  // the NVRTC options used, in order
  // The options the request added (canonical, in order), a part of
  // `options`: what tells apart entries of one kernel, params and arch.
  std::vector<std::string> request_options;
  std::string nvrtc_version;  // "13.0"
  std::vector<Symbol> symbols;
  std::string log;              // NVRTC's log
  double compile_ms = 0;        // wall time of the compile
  int64_t created_unix_ms = 0;  // set by Publish() when 0
  bool operator==(const EntryMeta&) const = default;
};

// Whether `key` is a well-formed content key (lowercase hex, 16..128 chars).
bool IsValidKey(std::string_view key);

// Whether an entry's bytes are a host shared object (a module kernel's
// tvm-ffi .so: ELF with e_machine x86-64 or AArch64) rather than a cubin
// (ELF for EM_CUDA), PTX or a fatbin. A shared object is code the client
// process runs on its CPU: the tiers that hold one say so (the shared tier
// serves one only signed).
bool IsHostSharedObject(std::string_view bytes);

// Hex XXH3-128 of `data`: the checksum blobs carry.
std::string Checksum128(std::string_view data);

// The encoding, exposed for tests, fuzzing and recovery tools besides the
// cache. Decode rejects any truncation, overrun or checksum mismatch
// (DATA_LOSS, "corrupt blob: ...") before any field is trusted.
std::string EncodeBlob(const EntryMeta& meta, std::string_view cubin);
absl::Status DecodeBlob(std::string_view bytes, EntryMeta* meta, std::string* cubin);
// DecodeBlob for a blob that was read into `blob` to be served: verified
// the same, and on success `blob` becomes the cubin in its own buffer (the
// cubin moved to its front, the rest cut off), so no second buffer the size
// of the cubin is allocated and filled. Unchanged on an error.
absl::Status DecodeBlobInPlace(std::string& blob, EntryMeta* meta);

// The checksum of an encoded blob: XXH3-128 (hex) of the bytes before its
// END field. Equal to what the END field holds when the blob is intact.
std::string BlobChecksum(std::string_view encoded);

// The checksum an encoded blob's END field claims, in hex, without hashing
// (DecodeBlob has verified it matches the content); empty if too short.
std::string StoredBlobChecksum(std::string_view encoded);

// Where a cache directory keeps the blob of `key` whose checksum is
// `checksum`, relative to the directory: blobs/KK/KEY-CHECKSUM, KK the key's
// first two hex digits. The name carries the checksum, so two processes
// publishing one key never overwrite each other's file.
std::filesystem::path BlobFileRelativePath(std::string_view key, std::string_view checksum);

}  // namespace jitd::cache
