// The blob file format (jitd/blob.h). Decoding checks every length against
// what remains, so a truncated or overrun file is rejected before any field
// is trusted. xxHash is compiled in (XXH_INLINE_ALL), so that a consumer of
// jitd_blob links no xxHash library.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <bit>
#include <cstring>

#include "jitd/base/coding.h"
#include "jitd/base/hex.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "jitd/blob.h"

namespace jitd::cache {
namespace {

using text::Cat;

constexpr std::string_view kMagic = "JITDBLOB";
constexpr uint32_t kFormatVersion = 1;
constexpr uint16_t kTagEnd = 0xFFFF;
constexpr size_t kChecksumBytes = 16;
// The END field: u16 tag + u32 length + the checksum.
constexpr size_t kEndFieldBytes = 2 + 4 + kChecksumBytes;
// Far above any real cubin or log; a length past it means a damaged file.
constexpr uint32_t kMaxFieldBytes = 1u << 30;
// DecodeBlobInPlace keeps what it cuts off a blob as the cubin's spare
// capacity up to this much, or an eighth of the cubin.
constexpr size_t kMaxKeptSlackBytes = 4096;

enum Tag : uint16_t {
  kKey = 1,
  kKernel = 2,
  kParams = 3,
  kArch = 4,
  kOption = 5,
  kNvrtcVersion = 6,
  kSymbol = 7,
  kLog = 8,
  kCompileMs = 9,
  kCreatedMs = 10,
  kCubin = 11,
  kRequestOption = 12,  // one per EntryMeta::request_options; older jitd skips it
};

void PutField(std::string& out, uint16_t tag, std::string_view value) {
  coding::PutFixed16(&out, tag);
  coding::PutFixed32(&out, static_cast<uint32_t>(value.size()));
  out.append(value);
}

void PutU64Field(std::string& out, uint16_t tag, uint64_t value) {
  coding::PutFixed16(&out, tag);
  coding::PutFixed32(&out, 8);
  coding::PutFixed64(&out, value);
}

// The 16 checksum bytes, most significant first: their hex is Checksum128.
std::string HashBytes(std::string_view data) {
  XXH128_hash_t h = XXH3_128bits(data.data(), data.size());
  std::string out(16, '\0');
  for (int i = 0; i < 8; ++i) {
    out[static_cast<size_t>(i)] = static_cast<char>(h.high64 >> (56 - 8 * i));
    out[static_cast<size_t>(8 + i)] = static_cast<char>(h.low64 >> (56 - 8 * i));
  }
  return out;
}

absl::Status Corrupt(std::string_view what) { return absl::DataLossError(Cat("corrupt blob: ", what)); }

}  // namespace

std::string Checksum128(std::string_view data) { return hex::Encode(HashBytes(data)); }

bool IsHostSharedObject(std::string_view bytes) {
  constexpr unsigned kX86_64 = 62, kAArch64 = 183;
  if (bytes.size() < 20 || bytes.substr(0, 4) != std::string_view("\x7f"
                                                                  "ELF",
                                                                  4))
    return false;
  const unsigned machine = static_cast<unsigned char>(bytes[18]) | (static_cast<unsigned char>(bytes[19]) << 8);
  return machine == kX86_64 || machine == kAArch64;
}

bool IsValidKey(std::string_view key) {
  if (key.size() < 16 || key.size() > 128) return false;
  for (char c : key) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string EncodeBlob(const EntryMeta& meta, std::string_view cubin) {
  std::string out;
  out.reserve(cubin.size() + meta.log.size() + 512);
  out.append(kMagic);
  coding::PutFixed32(&out, kFormatVersion);
  PutField(out, kKey, meta.key);
  PutField(out, kKernel, meta.kernel);
  PutField(out, kParams, meta.params);
  PutField(out, kArch, meta.arch);
  for (const auto& option : meta.options) PutField(out, kOption, option);
  for (const auto& option : meta.request_options) PutField(out, kRequestOption, option);
  PutField(out, kNvrtcVersion, meta.nvrtc_version);
  for (const auto& symbol : meta.symbols) {
    std::string value;
    coding::PutFixed32(&value, static_cast<uint32_t>(symbol.name_expression.size()));
    value.append(symbol.name_expression);
    value.append(symbol.lowered_name);
    PutField(out, kSymbol, value);
  }
  PutField(out, kLog, meta.log);
  PutU64Field(out, kCompileMs, std::bit_cast<uint64_t>(meta.compile_ms));
  PutU64Field(out, kCreatedMs, static_cast<uint64_t>(meta.created_unix_ms));
  PutField(out, kCubin, cubin);
  std::string sum = HashBytes(out);
  coding::PutFixed16(&out, kTagEnd);
  coding::PutFixed32(&out, kChecksumBytes);
  out.append(sum);
  return out;
}

namespace {

// DecodeBlob, with the cubin as a view into `bytes`: nothing is copied.
absl::Status DecodeBlobView(std::string_view bytes, EntryMeta* meta, std::string_view* cubin) {
  constexpr size_t kHeader = 8 + 4;
  constexpr size_t kFieldHeader = 2 + 4;
  if (bytes.size() < kHeader + kFieldHeader + kChecksumBytes) return Corrupt("shorter than a header");
  if (bytes.substr(0, 8) != kMagic) return Corrupt("bad magic");
  if (uint32_t version = coding::DecodeFixed<uint32_t>(bytes.data() + 8); version != kFormatVersion) {
    return Corrupt(Cat("unknown format version ", version));
  }
  EntryMeta out;
  std::string_view out_cubin;
  bool have_key = false, have_cubin = false, have_end = false;
  size_t pos = kHeader;
  while (pos < bytes.size()) {
    if (bytes.size() - pos < kFieldHeader) return Corrupt("truncated field header");
    uint16_t tag = coding::DecodeFixed<uint16_t>(bytes.data() + pos);
    uint32_t len = coding::DecodeFixed<uint32_t>(bytes.data() + pos + 2);
    size_t value_pos = pos + kFieldHeader;
    if (len > kMaxFieldBytes || len > bytes.size() - value_pos) return Corrupt("field runs past the end");
    std::string_view value = bytes.substr(value_pos, len);
    if (tag == kTagEnd) {
      if (len != kChecksumBytes) return Corrupt("bad checksum field");
      if (value_pos + len != bytes.size()) return Corrupt("data after the checksum");
      if (HashBytes(bytes.substr(0, pos)) != value) return Corrupt("checksum mismatch");
      have_end = true;
      break;
    }
    switch (tag) {
      case kKey:
        out.key = value;
        have_key = true;
        break;
      case kKernel:
        out.kernel = value;
        break;
      case kParams:
        out.params = value;
        break;
      case kArch:
        out.arch = value;
        break;
      case kOption:
        out.options.emplace_back(value);
        break;
      case kRequestOption:
        out.request_options.emplace_back(value);
        break;
      case kNvrtcVersion:
        out.nvrtc_version = value;
        break;
      case kLog:
        out.log = value;
        break;
      case kCubin:
        out_cubin = value;
        have_cubin = true;
        break;
      case kSymbol: {
        if (len < 4) return Corrupt("short symbol field");
        uint32_t expr_len = coding::DecodeFixed<uint32_t>(value.data());
        if (expr_len > len - 4) return Corrupt("symbol overruns its field");
        out.symbols.push_back(Symbol{std::string(value.substr(4, expr_len)), std::string(value.substr(4 + expr_len))});
        break;
      }
      case kCompileMs:
        if (len != 8) return Corrupt("bad compile_ms field");
        out.compile_ms = std::bit_cast<double>(coding::DecodeFixed<uint64_t>(value.data()));
        break;
      case kCreatedMs:
        if (len != 8) return Corrupt("bad created field");
        out.created_unix_ms = static_cast<int64_t>(coding::DecodeFixed<uint64_t>(value.data()));
        break;
      default:
        break;  // a field from a newer writer: skip it
    }
    pos = value_pos + len;
  }
  if (!have_end) return Corrupt("no checksum field (truncated)");
  if (!have_key || !IsValidKey(out.key)) return Corrupt("missing or malformed key");
  if (!have_cubin) return Corrupt("no cubin field");
  if (meta) *meta = std::move(out);
  *cubin = out_cubin;
  return absl::OkStatus();
}

}  // namespace

absl::Status DecodeBlob(std::string_view bytes, EntryMeta* meta, std::string* cubin) {
  std::string_view view;
  JITD_RETURN_IF_ERROR(DecodeBlobView(bytes, meta, &view));
  if (cubin) cubin->assign(view);
  return absl::OkStatus();
}

absl::Status DecodeBlobInPlace(std::string& blob, EntryMeta* meta) {
  std::string_view cubin;
  JITD_RETURN_IF_ERROR(DecodeBlobView(blob, meta, &cubin));
  const size_t at = static_cast<size_t>(cubin.data() - blob.data());
  const size_t size = cubin.size();
  const size_t cut = blob.size() - size;
  blob.resize(at + size);
  blob.erase(0, at);
  // A large remainder (a long log) is not kept as spare capacity.
  if (cut > kMaxKeptSlackBytes && cut > size / 8) blob.shrink_to_fit();
  return absl::OkStatus();
}

std::string BlobChecksum(std::string_view encoded) {
  if (encoded.size() < kEndFieldBytes) return Checksum128(encoded);
  return Checksum128(encoded.substr(0, encoded.size() - kEndFieldBytes));
}

std::string StoredBlobChecksum(std::string_view encoded) {
  if (encoded.size() < kEndFieldBytes) return {};
  return hex::Encode(encoded.substr(encoded.size() - kChecksumBytes));
}

std::filesystem::path BlobFileRelativePath(std::string_view key, std::string_view checksum) {
  return std::filesystem::path("blobs") / std::string(key.substr(0, 2)) / Cat(key, "-", checksum);
}

}  // namespace jitd::cache
