// The blob format: what decodes and, above all, what must not.
#include <gtest/gtest.h>

#include "testing.h"

namespace jitd::cache {
namespace {

using testing::CubinFor;
using testing::MetaFor;

TEST(BlobFormat, RoundTripsEveryField) {
  EntryMeta meta = MetaFor(7);
  meta.log = "warning: something harmless\n";
  meta.symbols.push_back({"sglang::b<int>", "_Z1bIiEvv"});
  meta.created_unix_ms = 1'700'000'000'123;
  std::string cubin = CubinFor(7, 1000);
  EntryMeta got;
  std::string got_cubin;
  ASSERT_TRUE(DecodeBlob(EncodeBlob(meta, cubin), &got, &got_cubin).ok());
  EXPECT_EQ(got, meta);
  EXPECT_EQ(got_cubin, cubin);
}

TEST(BlobFormat, EveryTruncationIsRejected) {
  std::string blob = EncodeBlob(MetaFor(1), CubinFor(1, 64));
  for (size_t len = 0; len < blob.size(); ++len) {
    EXPECT_FALSE(DecodeBlob(std::string_view(blob).substr(0, len), nullptr, nullptr).ok()) << "length " << len;
  }
}

TEST(BlobFormat, EveryFlippedByteIsRejected) {
  std::string blob = EncodeBlob(MetaFor(2), CubinFor(2, 64));
  for (size_t i = 0; i < blob.size(); ++i) {
    std::string damaged = blob;
    damaged[i] = static_cast<char>(damaged[i] ^ 0x01);
    EXPECT_FALSE(DecodeBlob(damaged, nullptr, nullptr).ok()) << "byte " << i;
  }
}

TEST(BlobFormat, TrailingBytesAreRejected) {
  std::string blob = EncodeBlob(MetaFor(3), CubinFor(3, 16)) + "x";
  EXPECT_FALSE(DecodeBlob(blob, nullptr, nullptr).ok());
}

TEST(BlobFormat, CorruptionIsReportedAsDataLoss) {
  std::string blob = EncodeBlob(MetaFor(4), CubinFor(4, 16));
  blob[blob.size() / 2] ^= 0x40;
  absl::Status s = DecodeBlob(blob, nullptr, nullptr);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("corrupt blob"), std::string_view::npos) << s;
}

// The serving path decodes in place (one buffer per disk hit): it must
// accept and reject exactly what DecodeBlob does, and give the same entry.
TEST(BlobFormat, InPlaceDecodeGivesWhatDecodeBlobGives) {
  for (const size_t log_bytes : {size_t{0}, size_t{100}, size_t{64 << 10}}) {
    EntryMeta meta = MetaFor(5);
    meta.log = std::string(log_bytes, 'w');
    const std::string cubin = CubinFor(5, 20000);
    std::string blob = EncodeBlob(meta, cubin);
    EntryMeta got;
    ASSERT_TRUE(DecodeBlobInPlace(blob, &got).ok()) << "log of " << log_bytes;
    EXPECT_EQ(got, meta);
    EXPECT_EQ(blob, cubin);
    // A long log cut off the blob is not kept as the cubin's spare capacity.
    if (log_bytes > cubin.size() / 8) {
      EXPECT_LT(blob.capacity(), cubin.size() + cubin.size() / 8);
    }
  }
}

TEST(BlobFormat, InPlaceDecodeLeavesARejectedBlobAsItWas) {
  const std::string blob = EncodeBlob(MetaFor(6), CubinFor(6, 64));
  for (size_t i = 0; i < blob.size(); ++i) {
    std::string damaged = blob;
    damaged[i] = static_cast<char>(damaged[i] ^ 0x01);
    const std::string before = damaged;
    const absl::Status s = DecodeBlobInPlace(damaged, nullptr);
    EXPECT_TRUE(absl::IsDataLoss(s)) << "byte " << i << ": " << s;
    EXPECT_EQ(s, DecodeBlob(before, nullptr, nullptr)) << "byte " << i;
    EXPECT_EQ(damaged, before) << "byte " << i;
  }
  std::string truncated = blob.substr(0, blob.size() - 1);
  EXPECT_FALSE(DecodeBlobInPlace(truncated, nullptr).ok());
  EXPECT_EQ(truncated, blob.substr(0, blob.size() - 1));
}

TEST(BlobFormat, ChecksumIsXxh3_128OfTheInput) {
  // Reference value of XXH3-128 for the empty input.
  EXPECT_EQ(Checksum128(""), "99aa06d3014798d86001c324468d497f");
  EXPECT_NE(Checksum128("a"), Checksum128("b"));
  EXPECT_EQ(Checksum128("jitd").size(), 32u);
}

TEST(BlobFormat, KeysAreLowercaseHexOfBoundedLength) {
  EXPECT_TRUE(IsValidKey(testing::KeyFor(1)));
  EXPECT_TRUE(IsValidKey(std::string(64, 'a')));
  EXPECT_FALSE(IsValidKey(""));
  EXPECT_FALSE(IsValidKey("abc"));                       // too short
  EXPECT_FALSE(IsValidKey(std::string(129, 'a')));       // too long
  EXPECT_FALSE(IsValidKey("ABCDEF0123456789ABCDEF"));    // upper case
  EXPECT_FALSE(IsValidKey("../../etc/passwd00000000"));  // path characters
}

}  // namespace
}  // namespace jitd::cache
