// Lower-case hexadecimal, the one spelling of bytes in jitd's keys,
// checksums, blob names and tokens.
#pragma once

#include <string>
#include <string_view>

namespace jitd::hex {

// Two lower-case digits per byte, most significant nibble first.
std::string Encode(std::string_view bytes);

// Whether `text` is non-empty and only lower-case hex digits.
bool IsLowerHex(std::string_view text);

}  // namespace jitd::hex
