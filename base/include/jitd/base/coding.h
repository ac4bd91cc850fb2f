// Fixed-width little-endian integers: the byte order of every binary format
// jitd writes (blob files, the compile workers' frames, the local path's
// frames), whatever the host's. Byte by byte, so no alignment is assumed;
// compilers turn each into one load or store on little-endian hosts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace jitd::coding {

template <typename T>
void PutFixed(std::string* out, T value) {
  static_assert(sizeof(T) <= 8 && T(-1) > T(0), "an unsigned integer");
  char bytes[sizeof(T)];
  for (size_t i = 0; i < sizeof(T); ++i) bytes[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  out->append(bytes, sizeof(T));
}

// `p` must hold sizeof(T) bytes.
template <typename T>
T DecodeFixed(const char* p) {
  static_assert(sizeof(T) <= 8 && T(-1) > T(0), "an unsigned integer");
  T value = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    value |= static_cast<T>(static_cast<T>(static_cast<unsigned char>(p[i])) << (8 * i));
  return value;
}

inline void PutFixed16(std::string* out, uint16_t v) { PutFixed(out, v); }
inline void PutFixed32(std::string* out, uint32_t v) { PutFixed(out, v); }
inline void PutFixed64(std::string* out, uint64_t v) { PutFixed(out, v); }
inline uint16_t DecodeFixed16(const char* p) { return DecodeFixed<uint16_t>(p); }
inline uint32_t DecodeFixed32(const char* p) { return DecodeFixed<uint32_t>(p); }
inline uint64_t DecodeFixed64(const char* p) { return DecodeFixed<uint64_t>(p); }

}  // namespace jitd::coding
