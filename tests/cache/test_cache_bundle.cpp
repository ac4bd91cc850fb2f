// Sealed seed bundles (jitd/bundle.h): what is written is read back
// verified, and every way a copy can go wrong (a flipped bit in an entry,
// a changed seal, a truncation, another fleet's key, a file that changes
// after it was opened) is refused with the entry or the seal named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "jitd/base/coding.h"
#include "jitd/base/files.h"
#include "jitd/bundle.h"
#include "testing.h"

namespace jitd::cache {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

EntryMeta MetaFor(uint64_t n) {
  EntryMeta meta;
  meta.key = testing::KeyFor(n);
  meta.kernel = "small.fill";
  meta.params = "dtype=fp" + std::to_string(32 * (n + 1));
  meta.arch = "sm_90";
  meta.nvrtc_version = "13.0";
  meta.symbols = {{"fill<float>", "_Z4fillIfEvPT_"}};
  return meta;
}

std::string CubinFor(uint64_t n) { return "cubin bytes of entry " + std::to_string(n) + std::string(64, 'x'); }

std::vector<std::string> Blobs(uint64_t count) {
  std::vector<std::string> blobs;
  for (uint64_t n = 0; n < count; ++n) blobs.push_back(EncodeBlob(MetaFor(n), CubinFor(n)));
  return blobs;
}

std::string ReadAll(const std::filesystem::path& path) { return *files::ReadWholeFile(path); }

// Rewrites `path` (read-only as written) with `bytes`.
void Overwrite(const std::filesystem::path& path, const std::string& bytes) {
  ::chmod(path.c_str(), 0644);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

class BundleTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;
  std::filesystem::path path_ = dir_.path() / "seed.jitdbundle";
};

TEST_F(BundleTest, WhatIsWrittenIsReadBackVerifiedUnderItsKeys) {
  ASSERT_TRUE(WriteBundle(path_, Blobs(3), "").ok());
  absl::StatusOr<std::unique_ptr<Bundle>> bundle = Bundle::Open(path_);
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  EXPECT_EQ((*bundle)->seal(), BundleSeal::kDigest);
  EXPECT_EQ((*bundle)->seal_hex().size(), 64u);
  EXPECT_EQ((*bundle)->size(), 3u);
  for (uint64_t n = 0; n < 3; ++n) {
    absl::StatusOr<Entry> entry = (*bundle)->Find(testing::KeyFor(n));
    ASSERT_TRUE(entry.ok()) << entry.status();
    EXPECT_EQ(entry->meta, MetaFor(n));
    EXPECT_EQ(entry->cubin, CubinFor(n));
    EXPECT_EQ(entry->checksum.size(), 32u);
  }
  EXPECT_EQ((*bundle)->Find(testing::KeyFor(7)).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(BundleTest, TheFileIsReadOnlyAndItsKeysAreSorted) {
  ASSERT_TRUE(WriteBundle(path_, {EncodeBlob(MetaFor(2), CubinFor(2)), EncodeBlob(MetaFor(1), CubinFor(1))}, "").ok());
  EXPECT_EQ(
      std::filesystem::status(path_).permissions() & std::filesystem::perms::all,
      std::filesystem::perms::owner_read | std::filesystem::perms::group_read | std::filesystem::perms::others_read);
  absl::StatusOr<std::unique_ptr<Bundle>> bundle = Bundle::Open(path_);
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  std::vector<std::string> expected = {testing::KeyFor(1), testing::KeyFor(2)};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ((*bundle)->keys(), expected);
}

TEST_F(BundleTest, AnEmptyBundleIsABundle) {
  ASSERT_TRUE(WriteBundle(path_, {}, "").ok());
  absl::StatusOr<std::unique_ptr<Bundle>> bundle = Bundle::Open(path_);
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  EXPECT_EQ((*bundle)->size(), 0u);
}

TEST_F(BundleTest, AFlippedByteInAnEntryIsRefusedNamingThatEntry) {
  ASSERT_TRUE(WriteBundle(path_, Blobs(3), "").ok());
  std::string bytes = ReadAll(path_);
  const size_t at = bytes.find(CubinFor(1));
  ASSERT_NE(at, std::string::npos);
  bytes[at] ^= 0x01;
  Overwrite(path_, bytes);
  absl::Status opened = Bundle::Open(path_).status();
  EXPECT_EQ(opened.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(opened.message(), HasSubstr("(key " + testing::KeyFor(1) + ")"));
  EXPECT_THAT(opened.message(), HasSubstr("corrupt blob"));
}

TEST_F(BundleTest, AnEntrySwappedForAnotherValidOneBreaksTheDigest) {
  // Entries 0 and 1 are the same length: swapping them keeps every blob
  // valid, so only the index's keys and the seal can tell.
  ASSERT_TRUE(WriteBundle(path_, Blobs(2), "").ok());
  std::string bytes = ReadAll(path_);
  const std::string first = EncodeBlob(MetaFor(0), CubinFor(0));
  const std::string second = EncodeBlob(MetaFor(1), CubinFor(1));
  ASSERT_EQ(first.size(), second.size());
  const size_t a = bytes.find(first), b = bytes.find(second);
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(b, std::string::npos);
  bytes.replace(a, first.size(), second);
  bytes.replace(b, second.size(), first);
  Overwrite(path_, bytes);
  absl::Status opened = Bundle::Open(path_).status();
  EXPECT_EQ(opened.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(opened.message(), HasSubstr("is filed under"));
}

TEST_F(BundleTest, AChangedSealIsRefused) {
  ASSERT_TRUE(WriteBundle(path_, Blobs(2), "").ok());
  std::string bytes = ReadAll(path_);
  bytes[bytes.size() - 8 - 1] ^= 0x40;  // the seal's last byte
  Overwrite(path_, bytes);
  absl::Status opened = Bundle::Open(path_).status();
  EXPECT_EQ(opened.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(opened.message(), HasSubstr("digest does not match"));
}

TEST_F(BundleTest, TruncatedCopiesAndOtherFilesAreRefused) {
  ASSERT_TRUE(WriteBundle(path_, Blobs(2), "").ok());
  const std::string bytes = ReadAll(path_);
  for (size_t keep : {size_t{0}, size_t{10}, bytes.size() / 2, bytes.size() - 1}) {
    Overwrite(path_, bytes.substr(0, keep));
    absl::Status opened = Bundle::Open(path_).status();
    EXPECT_EQ(opened.code(), absl::StatusCode::kDataLoss) << keep << " bytes: " << opened;
  }
  Overwrite(path_, "not a bundle at all, but long enough to hold the header and the trailer of one......");
  EXPECT_THAT(Bundle::Open(path_).status().message(), HasSubstr("not a jitd bundle"));
  EXPECT_EQ(Bundle::Open(dir_.path() / "absent").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(BundleTest, HostileOffsetsAndLengthsAreRefusedBeforeAnythingIsRead) {
  ASSERT_TRUE(WriteBundle(path_, Blobs(1), "").ok());
  const std::string bytes = ReadAll(path_);
  const size_t offset_field = bytes.size() - 8 - 32 - 8;  // before the seal and the end marker
  const uint64_t index_offset = coding::DecodeFixed64(bytes.data() + offset_field);

  std::string wrapped = bytes;  // an offset whose sum with anything overflows
  wrapped.replace(offset_field, 8, std::string("\xfc\xff\xff\xff\xff\xff\xff\xff", 8));
  Overwrite(path_, wrapped);
  EXPECT_THAT(Bundle::Open(path_).status().message(), HasSubstr("is outside the file"));

  std::string huge = bytes;  // the first entry's length field: 2^40 bytes
  const size_t key_len = coding::DecodeFixed16(bytes.data() + index_offset + 8);
  const size_t length_field = index_offset + 8 + 2 + key_len + 8;
  std::string length;
  coding::PutFixed64(&length, uint64_t{1} << 40);
  huge.replace(length_field, 8, length);
  Overwrite(path_, huge);
  EXPECT_THAT(Bundle::Open(path_).status().message(), HasSubstr("lies outside the entries"));
}

TEST_F(BundleTest, ASignedBundleOpensWithItsKeyOnly) {
  const std::string key = "fleet key of sixteen bytes or more";
  ASSERT_TRUE(WriteBundle(path_, Blobs(2), key).ok());
  absl::StatusOr<std::unique_ptr<Bundle>> bundle = Bundle::Open(path_, key);
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  EXPECT_EQ((*bundle)->seal(), BundleSeal::kSigned);

  absl::Status without = Bundle::Open(path_).status();
  EXPECT_EQ(without.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(without.message(), HasSubstr("signed with a fleet key"));
  absl::Status other = Bundle::Open(path_, "another fleet's key, also long").status();
  EXPECT_EQ(other.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(other.message(), HasSubstr("signature does not match"));
}

TEST_F(BundleTest, ADigestBundleIsRefusedWhereSignedOnesAreRequired) {
  ASSERT_TRUE(WriteBundle(path_, Blobs(1), "").ok());
  absl::Status opened = Bundle::Open(path_, "fleet key of sixteen bytes or more").status();
  EXPECT_EQ(opened.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(opened.message(), HasSubstr("not signed"));
}

TEST_F(BundleTest, AnEntryChangedAfterOpenIsNeverServed) {
  ASSERT_TRUE(WriteBundle(path_, Blobs(2), "").ok());
  absl::StatusOr<std::unique_ptr<Bundle>> bundle = Bundle::Open(path_);
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  std::string bytes = ReadAll(path_);
  const size_t at = bytes.find(CubinFor(0));
  ASSERT_NE(at, std::string::npos);
  bytes[at] ^= 0x01;
  Overwrite(path_, bytes);  // same inode: the open descriptor reads the new bytes
  EXPECT_EQ((*bundle)->Find(testing::KeyFor(0)).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE((*bundle)->Find(testing::KeyFor(1)).ok());
}

// Planted bytes under the right key: an entry rewritten in place after
// mount with other cubin bytes and a recomputed blob checksum decodes
// cleanly, so only the digest taken under the seal at mount can refuse it.
// Digest-sealed and signed bundles alike.
TEST_F(BundleTest, AnEntryRewrittenInPlaceWithAValidChecksumIsNeverServed) {
  for (const std::string& key : {std::string(), std::string("fleet key of sixteen bytes or more")}) {
    SCOPED_TRACE(key.empty() ? "digest seal" : "signed");
    std::filesystem::remove(path_);
    ASSERT_TRUE(WriteBundle(path_, Blobs(2), key).ok());
    absl::StatusOr<std::unique_ptr<Bundle>> bundle = Bundle::Open(path_, key);
    ASSERT_TRUE(bundle.ok()) << bundle.status();
    std::string planted_cubin = CubinFor(0);
    planted_cubin[0] = 'C';  // same length, other bytes
    const std::string original = EncodeBlob(MetaFor(0), CubinFor(0));
    const std::string planted = EncodeBlob(MetaFor(0), planted_cubin);
    ASSERT_EQ(original.size(), planted.size());
    EntryMeta meta;
    std::string cubin;
    ASSERT_TRUE(DecodeBlob(planted, &meta, &cubin).ok());  // a valid blob of the right key
    std::string bytes = ReadAll(path_);
    const size_t at = bytes.find(original);
    ASSERT_NE(at, std::string::npos);
    bytes.replace(at, original.size(), planted);
    Overwrite(path_, bytes);
    absl::StatusOr<Entry> found = (*bundle)->Find(testing::KeyFor(0));
    ASSERT_EQ(found.status().code(), absl::StatusCode::kDataLoss) << "planted bytes were served";
    EXPECT_THAT(found.status().message(), HasSubstr("changed after the bundle was mounted"));
    EXPECT_TRUE((*bundle)->Find(testing::KeyFor(1)).ok());
    // The file as it now is does not open: its seal no longer matches.
    EXPECT_EQ(Bundle::Open(path_, key).status().code(), absl::StatusCode::kDataLoss);
  }
}

TEST_F(BundleTest, EntriesThatOverlapAreRefusedAtOpen) {
  // Two index rows pointing into one blob: the index is rewritten so that
  // entry 1 starts inside entry 0.
  ASSERT_TRUE(WriteBundle(path_, Blobs(2), "").ok());
  std::string bytes = ReadAll(path_);
  const uint64_t index_offset = coding::DecodeFixed64(bytes.data() + bytes.size() - 8 - 32 - 8);
  const size_t key_len = testing::KeyFor(0).size();
  const size_t second_offset_at = index_offset + 8 + (2 + key_len + 16) + 2 + key_len;
  const uint64_t first_offset = coding::DecodeFixed64(bytes.data() + index_offset + 8 + 2 + key_len);
  std::string patched;
  coding::PutFixed64(&patched, first_offset + 1);
  bytes.replace(second_offset_at, 8, patched);
  Overwrite(path_, bytes);
  absl::Status opened = Bundle::Open(path_).status();
  EXPECT_EQ(opened.code(), absl::StatusCode::kDataLoss);
}

TEST_F(BundleTest, WritingRefusesRepeatedKeysAndMalformedBlobsAndWritesNothing) {
  std::vector<std::string> repeated = Blobs(2);
  repeated.push_back(repeated[0]);
  absl::Status twice = WriteBundle(path_, repeated, "");
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(twice.message(), HasSubstr(testing::KeyFor(0)));
  std::vector<std::string> broken = Blobs(2);
  broken[1].resize(broken[1].size() - 3);
  absl::Status malformed = WriteBundle(path_, broken, "");
  EXPECT_EQ(malformed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(malformed.message(), HasSubstr("entry 1"));
  EXPECT_FALSE(std::filesystem::exists(path_));
}

}  // namespace
}  // namespace jitd::cache
