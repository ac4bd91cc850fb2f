// jitd::digest against published vectors (FIPS 180-2 and RFC 4231), and
// pieces against one piece: keys, seals and signatures rest on these.
#include <gtest/gtest.h>

#include "jitd/base/digest.h"
#include "jitd/base/hex.h"

namespace jitd::digest {
namespace {

std::string HexOf(absl::StatusOr<std::string> raw) {
  EXPECT_TRUE(raw.ok()) << raw.status();
  return raw.ok() ? hex::Encode(*raw) : "";
}

TEST(Digest, Sha256MatchesThePublishedVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(HexOf(Sha256Of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Digest, TagsAreEqualOnlyWhenEveryByteAndTheLengthAre) {
  const std::string tag = *Sha256Of("a tag");
  std::string flipped = tag;
  flipped.back() ^= 1;
  EXPECT_TRUE(TagsEqual(tag, tag));
  EXPECT_FALSE(TagsEqual(tag, flipped));
  EXPECT_FALSE(TagsEqual(tag, tag.substr(0, 31)));
  EXPECT_FALSE(TagsEqual("", tag));
  EXPECT_TRUE(TagsEqual("", ""));
}

TEST(Digest, PiecesGiveTheDigestOfTheirConcatenation) {
  Sha256 sha;
  sha.Update("ab");
  sha.Update("");
  sha.Update("c");
  EXPECT_EQ(HexOf(sha.Final()), Sha256Hex("abc"));
}

TEST(Digest, HmacSha256MatchesRfc4231) {
  Sha256 mac = Sha256::Hmac("Jefe");
  mac.Update("what do ya want ");
  mac.Update("for nothing?");
  EXPECT_EQ(HexOf(mac.Final()), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Test case 1: a 20-byte key of 0x0b.
  Sha256 first = Sha256::Hmac(std::string(20, '\x0b'));
  first.Update("Hi There");
  EXPECT_EQ(HexOf(first.Final()), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}

TEST(Digest, AKeyChangesTheDigestAndAMovedOneKeepsIt) {
  Sha256 keyed = Sha256::Hmac("k");
  keyed.Update("abc");
  Sha256 moved = std::move(keyed);
  const std::string tag = HexOf(moved.Final());
  EXPECT_EQ(tag.size(), 2 * kSha256Bytes);
  EXPECT_NE(tag, Sha256Hex("abc"));
}

}  // namespace
}  // namespace jitd::digest
