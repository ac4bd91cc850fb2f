#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "jitd/base/coding.h"

namespace jitd::coding {
namespace {

TEST(Coding, WritesLittleEndianWhateverTheHost) {
  std::string out;
  PutFixed16(&out, 0x0102);
  PutFixed32(&out, 0x03040506u);
  PutFixed64(&out, 0x0708090a0b0c0d0eull);
  EXPECT_EQ(out, std::string("\x02\x01\x06\x05\x04\x03\x0e\x0d\x0c\x0b\x0a\x09\x08\x07", 14));
}

TEST(Coding, DecodesWhatItWroteAtAnyOffsetAndEveryBitPattern) {
  const uint64_t values[] = {0,
                             1,
                             0x80,
                             0xff,
                             0x8000,
                             0xffff,
                             0x80000000u,
                             0xffffffffu,
                             0x8000000000000000ull,
                             0xffffffffffffffffull,
                             0x0123456789abcdefull};
  for (const uint64_t v : values) {
    std::string out = "x";  // an odd offset: nothing assumes alignment
    PutFixed16(&out, static_cast<uint16_t>(v));
    PutFixed32(&out, static_cast<uint32_t>(v));
    PutFixed64(&out, v);
    ASSERT_EQ(out.size(), 1u + 2 + 4 + 8);
    EXPECT_EQ(DecodeFixed16(out.data() + 1), static_cast<uint16_t>(v));
    EXPECT_EQ(DecodeFixed32(out.data() + 3), static_cast<uint32_t>(v));
    EXPECT_EQ(DecodeFixed64(out.data() + 7), v);
  }
}

TEST(Coding, HighBytesAreNotSignExtended) {
  const char bytes[8] = {'\xff', '\xfe', '\x80', '\x81', '\x00', '\x7f', '\xc0', '\x90'};
  EXPECT_EQ(DecodeFixed16(bytes), 0xfeffu);
  EXPECT_EQ(DecodeFixed32(bytes), 0x8180feffu);
  EXPECT_EQ(DecodeFixed64(bytes), 0x90c07f008180feffull);
}

}  // namespace
}  // namespace jitd::coding
