#include "jitd/bundle.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "jitd/base/coding.h"
#include "jitd/base/digest.h"
#include "jitd/base/files.h"
#include "jitd/base/hex.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"

namespace jitd::cache {
namespace {

using text::Cat;

constexpr std::string_view kMagic = "JITDBNDL";
constexpr std::string_view kEndMagic = "JITDBEND";
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 4;
constexpr size_t kSealBytes = digest::kSha256Bytes;
constexpr size_t kTrailerBytes = 8 + kSealBytes + 8;  // index offset, seal, end magic
// A bundle larger than this is refused at open: 64 GiB is far beyond a
// fleet's every kernel and keeps a hostile length field from meaning much.
constexpr uint64_t kMaxBundleBytes = uint64_t{64} << 30;
// The index of a bundle of every kernel a fleet serves is a few hundred
// KiB; an entry is one blob, whose cubin is a few MiB at most. Above these
// a length field is a hostile one, refused before anything is allocated.
constexpr uint64_t kMaxIndexBytes = 64 << 20;
constexpr uint64_t kMaxEntryBytes = 256 << 20;
// The seal is computed over the file in pieces of this size.
constexpr size_t kChunkBytes = 1 << 20;

// SHA-256 when the bundle is not signed, HMAC-SHA256 with the fleet's key
// when it is.
digest::Sha256 Sealer(std::string_view key) { return key.empty() ? digest::Sha256() : digest::Sha256::Hmac(key); }

absl::Status Corrupt(const std::filesystem::path& path, std::string_view why) {
  return absl::DataLossError(Cat("bundle ", path.string(), ": ", why));
}

// SHA-256 of one entry's stored bytes, taken at mount and at every read.
absl::StatusOr<std::string> EntryDigest(std::string_view blob) { return digest::Sha256Of(blob); }

}  // namespace

absl::Status WriteBundle(const std::filesystem::path& path, const std::vector<std::string>& blobs,
                         std::string_view signing_key) {
  // The keys, checked, in the order the index lists them.
  std::map<std::string, size_t> order;
  for (size_t i = 0; i < blobs.size(); ++i) {
    EntryMeta meta;
    std::string cubin;
    if (absl::Status decoded = DecodeBlob(blobs[i], &meta, &cubin); !decoded.ok()) {
      return absl::InvalidArgumentError(Cat("entry ", i, " of the bundle: ", decoded.message()));
    }
    if (!order.emplace(meta.key, i).second) {
      return absl::InvalidArgumentError(Cat("two entries of the bundle have the key ", meta.key));
    }
  }
  std::string out(kMagic);
  coding::PutFixed32(&out, kVersion);
  coding::PutFixed32(&out, static_cast<uint32_t>(signing_key.empty() ? BundleSeal::kDigest : BundleSeal::kSigned));
  std::string index;
  coding::PutFixed64(&index, order.size());
  for (const auto& [key, i] : order) {
    coding::PutFixed16(&index, static_cast<uint16_t>(key.size()));
    index.append(key);
    coding::PutFixed64(&index, out.size());
    coding::PutFixed64(&index, blobs[i].size());
    out.append(blobs[i]);
  }
  const uint64_t index_offset = out.size();
  out.append(index);
  coding::PutFixed64(&out, index_offset);
  digest::Sha256 sealer = Sealer(signing_key);
  sealer.Update(out);
  JITD_ASSIGN_OR_RETURN(std::string seal, sealer.Final());
  out.append(seal);
  out.append(kEndMagic);
  files::AtomicWrite how;
  how.mode = 0444;
  return files::WriteFileAtomically(path, out, how);
}

Bundle::~Bundle() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<std::string> Bundle::ReadAt(uint64_t offset, uint64_t length) const {
  std::string bytes(length, '\0');
  size_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd_, bytes.data() + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return files::ErrnoStatus(errno, "read", path_);
    if (n == 0) return Corrupt(path_, "ends early (truncated?)");
    done += static_cast<size_t>(n);
  }
  return bytes;
}

absl::StatusOr<std::unique_ptr<Bundle>> Bundle::Open(const std::filesystem::path& path, std::string_view signing_key) {
  std::unique_ptr<Bundle> bundle(new Bundle());
  bundle->path_ = path;
  bundle->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (bundle->fd_ < 0) return files::ErrnoStatus(errno, "open", path);
  struct stat st {};
  if (::fstat(bundle->fd_, &st) != 0) return files::ErrnoStatus(errno, "stat", path);
  bundle->file_bytes_ = static_cast<uint64_t>(st.st_size);
  const uint64_t size = bundle->file_bytes_;
  if (size < kHeaderBytes + 8 + kTrailerBytes) return Corrupt(path, Cat(size, " bytes is too short for a bundle"));
  if (size > kMaxBundleBytes) return Corrupt(path, Cat(size, " bytes is over the bound of ", kMaxBundleBytes));

  JITD_ASSIGN_OR_RETURN(std::string header, bundle->ReadAt(0, kHeaderBytes));
  if (std::string_view(header).substr(0, kMagic.size()) != kMagic) return Corrupt(path, "not a jitd bundle (no magic)");
  if (const uint32_t version = coding::DecodeFixed32(header.data() + 8); version != kVersion) {
    return Corrupt(path, Cat("format version ", version, "; this jitd reads version ", kVersion));
  }
  const uint32_t seal_kind = coding::DecodeFixed32(header.data() + 12);
  if (seal_kind != static_cast<uint32_t>(BundleSeal::kDigest) &&
      seal_kind != static_cast<uint32_t>(BundleSeal::kSigned)) {
    return Corrupt(path, Cat("unknown seal kind ", seal_kind));
  }
  bundle->seal_ = static_cast<BundleSeal>(seal_kind);
  if (bundle->seal_ == BundleSeal::kSigned && signing_key.empty()) {
    return absl::FailedPreconditionError(Cat("bundle ", path.string(),
                                             " is signed with a fleet key: give the key to verify it "
                                             "(--signing-key-file, or the daemon's --remote-signing-key-file)"));
  }
  if (bundle->seal_ == BundleSeal::kDigest && !signing_key.empty()) {
    return absl::FailedPreconditionError(Cat("bundle ", path.string(),
                                             " is sealed with a digest, not signed: a daemon holding a fleet key "
                                             "mounts signed bundles only (make it with --signing-key-file)"));
  }

  JITD_ASSIGN_OR_RETURN(std::string trailer, bundle->ReadAt(size - kTrailerBytes, kTrailerBytes));
  if (std::string_view(trailer).substr(8 + kSealBytes) != kEndMagic) return Corrupt(path, "no end marker (truncated?)");
  const uint64_t index_offset = coding::DecodeFixed64(trailer.data());
  if (index_offset < kHeaderBytes || index_offset > size - kTrailerBytes - 8) {  // no sum to overflow
    return Corrupt(path, Cat("index offset ", index_offset, " is outside the file"));
  }
  JITD_ASSIGN_OR_RETURN(std::string index, bundle->ReadIndex(index_offset));
  JITD_RETURN_IF_ERROR(bundle->CheckSeal(signing_key, header, index, trailer));
  return bundle;
}

absl::StatusOr<std::string> Bundle::ReadIndex(uint64_t index_offset) {
  const std::filesystem::path& path = path_;
  const uint64_t size = file_bytes_;
  if (size - kTrailerBytes - index_offset > kMaxIndexBytes) {
    return Corrupt(
        path, Cat("an index of ", size - kTrailerBytes - index_offset, " bytes is over the bound of ", kMaxIndexBytes));
  }
  JITD_ASSIGN_OR_RETURN(std::string index, ReadAt(index_offset, size - kTrailerBytes - index_offset));
  const uint64_t count = coding::DecodeFixed64(index.data());
  size_t at = 8;
  for (uint64_t i = 0; i < count; ++i) {
    if (index.size() - at < 2) return Corrupt(path, Cat("the index ends inside entry ", i));
    const size_t key_len = coding::DecodeFixed16(index.data() + at);
    if (index.size() - at - 2 < key_len + 16) return Corrupt(path, Cat("the index ends inside entry ", i));
    std::string key = index.substr(at + 2, key_len);
    const uint64_t offset = coding::DecodeFixed64(index.data() + at + 2 + key_len);
    const uint64_t length = coding::DecodeFixed64(index.data() + at + 2 + key_len + 8);
    at += 2 + key_len + 16;
    if (offset < kHeaderBytes || offset > index_offset || length > index_offset - offset) {
      return Corrupt(path, Cat("entry ", i, " (key ", key, ") lies outside the entries"));
    }
    if (length > kMaxEntryBytes) {
      return Corrupt(path,
                     Cat("entry ", i, " (key ", key, ") is ", length, " bytes, over the bound of ", kMaxEntryBytes));
    }
    if (!index_.emplace(std::move(key), Slot{offset, length, i, {}}).second) {
      return Corrupt(path, Cat("entry ", i, " repeats a key"));
    }
  }
  if (at != index.size()) return Corrupt(path, "bytes after the index's last entry");
  return index;
}

absl::Status Bundle::CheckSeal(std::string_view signing_key, std::string_view header, std::string_view index,
                               std::string_view trailer) {
  const std::filesystem::path& path = path_;
  const uint64_t index_offset = coding::DecodeFixed64(trailer.data());
  // One pass over the file, in order. The seal is computed over exactly the
  // bytes this mount uses: the header and index already parsed, and each
  // entry as read here, which is also the read that verifies the entry and
  // takes its digest. Find() later holds every read to that digest, so
  // bytes changed after this pass are never served, whatever their
  // checksum says, and a signed bundle's entries are held to what the
  // signature covered.
  std::vector<std::pair<const std::string*, Slot*>> by_offset;
  by_offset.reserve(index_.size());
  for (auto& [key, slot] : index_) by_offset.emplace_back(&key, &slot);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto& a, const auto& b) { return a.second->offset < b.second->offset; });
  digest::Sha256 sealer = Sealer(signing_key);
  sealer.Update(header);
  uint64_t at = kHeaderBytes;
  auto seal_up_to = [&](uint64_t end) -> absl::Status {
    for (; at < end; at += std::min<uint64_t>(kChunkBytes, end - at)) {
      JITD_ASSIGN_OR_RETURN(std::string chunk, ReadAt(at, std::min<uint64_t>(kChunkBytes, end - at)));
      sealer.Update(chunk);
    }
    return absl::OkStatus();
  };
  for (auto [key_ptr, slot] : by_offset) {
    const std::string& key = *key_ptr;
    if (slot->offset < at) return Corrupt(path, Cat("entry ", slot->position, " (key ", key, ") overlaps another"));
    JITD_RETURN_IF_ERROR(seal_up_to(slot->offset));
    JITD_ASSIGN_OR_RETURN(std::string blob, ReadAt(slot->offset, slot->length));
    sealer.Update(blob);
    at = slot->offset + slot->length;
    // Each entry verifies on its own too: its blob's checksum, and the key
    // the blob names against the key the index files it under.
    EntryMeta meta;
    std::string cubin;
    if (absl::Status decoded = DecodeBlob(blob, &meta, &cubin); !decoded.ok()) {
      return Corrupt(path, Cat("entry ", slot->position, " (key ", key, "): ", decoded.message()));
    }
    if (meta.key != key) {
      return Corrupt(path, Cat("entry ", slot->position, " is filed under ", key, " but holds ", meta.key));
    }
    JITD_ASSIGN_OR_RETURN(slot->digest, EntryDigest(blob));
    if (IsHostSharedObject(cubin) &&
        std::find(module_builders_.begin(), module_builders_.end(), meta.nvrtc_version) == module_builders_.end()) {
      module_builders_.push_back(meta.nvrtc_version);
    }
  }
  JITD_RETURN_IF_ERROR(seal_up_to(index_offset));
  sealer.Update(index);
  sealer.Update(trailer.substr(0, 8));
  JITD_ASSIGN_OR_RETURN(std::string expected, sealer.Final());
  const std::string_view stored = trailer.substr(8, kSealBytes);
  if (stored != expected) {
    return Corrupt(path, seal_ == BundleSeal::kSigned
                             ? "its signature does not match this key (another fleet's key, or a changed file)"
                             : "its digest does not match its contents (the file changed after it was sealed)");
  }
  seal_hex_ = hex::Encode(stored);
  return absl::OkStatus();
}

std::vector<std::string> Bundle::keys() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [key, slot] : index_) out.push_back(key);
  return out;
}

absl::StatusOr<Entry> Bundle::Find(std::string_view key) const {
  auto it = index_.find(key);
  if (it == index_.end()) return absl::NotFoundError(Cat("bundle ", path_.string(), " has no entry ", key));
  JITD_ASSIGN_OR_RETURN(std::string blob, ReadAt(it->second.offset, it->second.length));
  // Held to the digest taken in the pass that checked the seal: an entry
  // edited in place after mount (its blob checksum recomputed or not) is
  // never served.
  JITD_ASSIGN_OR_RETURN(std::string digest, EntryDigest(blob));
  if (digest != it->second.digest) {
    return Corrupt(path_, Cat("entry ", key,
                              " changed after the bundle was mounted: its bytes no longer match the digest "
                              "verified under the bundle's seal"));
  }
  Entry entry;
  entry.checksum = StoredBlobChecksum(blob);
  if (absl::Status decoded = DecodeBlobInPlace(blob, &entry.meta); !decoded.ok()) {
    return Corrupt(path_, Cat("entry ", key, ": ", decoded.message()));
  }
  if (entry.meta.key != key) return Corrupt(path_, Cat("entry ", key, " now holds ", entry.meta.key));
  entry.cubin = std::move(blob);
  return entry;
}

std::string_view BundleSealName(BundleSeal seal) {
  return seal == BundleSeal::kSigned ? "signed with a fleet key" : "sealed with a SHA-256 digest";
}

}  // namespace jitd::cache
