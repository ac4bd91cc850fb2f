#include <gtest/gtest.h>

#include <string>

#include "jitd/base/hex.h"

namespace jitd::hex {
namespace {

TEST(Hex, EncodesEveryByteAsTwoLowerCaseDigitsHighNibbleFirst) {
  EXPECT_EQ(Encode(""), "");
  EXPECT_EQ(Encode(std::string("\x00\x01\x7f\x80\xab\xff", 6)), "00017f80abff");
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::string hex = Encode(all);
  ASSERT_EQ(hex.size(), 512u);
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(std::stoi(hex.substr(static_cast<size_t>(2 * b), 2), nullptr, 16), b) << b;
  }
  EXPECT_TRUE(IsLowerHex(hex));
}

TEST(Hex, IsLowerHexRefusesEmptyUpperCaseAndOtherCharacters) {
  EXPECT_TRUE(IsLowerHex("0123456789abcdef"));
  EXPECT_FALSE(IsLowerHex(""));
  EXPECT_FALSE(IsLowerHex("ABCDEF"));
  EXPECT_FALSE(IsLowerHex("12g4"));
  EXPECT_FALSE(IsLowerHex("12 4"));
  EXPECT_FALSE(IsLowerHex(std::string("12\0", 3)));
}

}  // namespace
}  // namespace jitd::hex
