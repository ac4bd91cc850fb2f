// Sealed seed bundles: one read-only file that carries verified cache
// entries from a build (an image, a CI job) to the daemons that serve them,
// and proves on arrival that nothing in it changed.
//
//   "JITDBNDL"        8 bytes magic
//   u32 version       1
//   u32 seal kind     1 = SHA-256 digest, 2 = HMAC-SHA256 with the fleet's key
//   entries           each a blob in jitd_blob's format (jitd/blob.h), which
//                     describes and checksums itself, back to back
//   index             u64 count, then per entry, sorted by key: u16 key
//                     length, key, u64 offset of its blob, u64 blob length
//   u64               offset of the index
//   32 bytes          the seal over every byte before it
//   "JITDBEND"        8 bytes
//
// Integers are little-endian (jitd/base/coding.h). The index is the list
// of keys: a reader finds an entry without scanning the blobs.
//
// A digest seal proves the file is whole (a truncated copy, a flipped bit,
// an entry swapped for another) but not who made it: anyone can reseal a
// file. A signed bundle needs the fleet's key (the daemon's
// --remote-signing-key-file) to verify, and to make.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "jitd/blob.h"
#include "jitd/cache.h"

namespace jitd::cache {

enum class BundleSeal : uint32_t { kDigest = 1, kSigned = 2 };
// "sealed with a SHA-256 digest", "signed with a fleet key".
std::string_view BundleSealName(BundleSeal seal);

// Writes a bundle of `blobs` (encoded blobs, as EncodeBlob makes them) to
// `path`: signed with `signing_key` when it is not empty, else sealed with a
// SHA-256 digest. Every blob is decoded (verified) first; two blobs with one
// key, or a malformed one, are INVALID_ARGUMENT and nothing is written.
// The file is built in memory (a bundle is what one image carries), then
// appears whole or not at all (temporary file, fsync, rename), read-only
// (0444).
absl::Status WriteBundle(const std::filesystem::path& path, const std::vector<std::string>& blobs,
                         std::string_view signing_key);

// An open, verified bundle. Open() reads the whole file once, in order:
// the seal is computed over exactly the bytes read, every entry is decoded
// against its checksum and its key, and each entry's SHA-256 is kept in
// memory. Find() reads one entry again (pread) and holds it to that digest
// before decoding it, so bytes changed after Open() are never served, even
// with a recomputed blob checksum; a signed bundle's entries are held to
// what its signature covered.
//
// Thread safety: every method may be called from any thread.
class Bundle {
 public:
  // `signing_key` empty: the bundle must carry a digest seal (a signed one is
  // refused: it cannot be checked without the key). Not empty: the bundle
  // must be signed with that key. Errors:
  //   NOT_FOUND / PERMISSION_DENIED  the file cannot be opened
  //   DATA_LOSS          not a bundle, truncated, or a bad entry (the first
  //                      one, by index position and key) or a seal that
  //                      does not match
  //   FAILED_PRECONDITION  a signed bundle without a key, or the reverse
  static absl::StatusOr<std::unique_ptr<Bundle>> Open(const std::filesystem::path& path,
                                                      std::string_view signing_key = {});
  ~Bundle();
  Bundle(const Bundle&) = delete;
  Bundle& operator=(const Bundle&) = delete;

  const std::filesystem::path& path() const { return path_; }
  BundleSeal seal() const { return seal_; }
  // The seal's 32 bytes in hex (the digest of a digest-sealed bundle).
  const std::string& seal_hex() const { return seal_hex_; }
  // Every key, sorted.
  std::vector<std::string> keys() const;
  size_t size() const { return index_.size(); }
  uint64_t file_bytes() const { return file_bytes_; }

  // What built its module entries (host shared objects): the distinct
  // `nvrtc_version` of each, "nvcc V13.0.88; tvm-ffi 0.1.15.post2;
  // toolchain <fingerprint>". A daemon without nvcc serves them by it
  // (manifest::ModuleToolchainSource).
  const std::vector<std::string>& module_builders() const { return module_builders_; }

  // The entry of `key`, read and verified now: NOT_FOUND when the bundle
  // has no such key, DATA_LOSS when its bytes no longer verify.
  absl::StatusOr<Entry> Find(std::string_view key) const;

 private:
  struct Slot {
    uint64_t offset = 0;
    uint64_t length = 0;
    uint64_t position = 0;  // in the index, for messages
    std::string digest;     // SHA-256 of the entry's bytes, taken under the seal
  };
  Bundle() = default;
  absl::StatusOr<std::string> ReadIndex(uint64_t index_offset);
  absl::StatusOr<std::string> ReadAt(uint64_t offset, uint64_t length) const;
  // Open's steps: the index parsed (ReadIndex returns its bytes), then one
  // pass that seals the header, every entry and the index, verifies each
  // entry and keeps its digest.
  absl::Status CheckSeal(std::string_view signing_key, std::string_view header, std::string_view index,
                         std::string_view trailer);

  std::filesystem::path path_;
  int fd_ = -1;
  uint64_t file_bytes_ = 0;
  BundleSeal seal_ = BundleSeal::kDigest;
  std::string seal_hex_;
  std::map<std::string, Slot, std::less<>> index_;
  std::vector<std::string> module_builders_;
};

}  // namespace jitd::cache
