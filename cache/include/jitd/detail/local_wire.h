// The local path's framing, shared by the daemon (daemon/local_server.h)
// and the client (client/src/local_channel.h); docs/CONTRACT.md, "The local
// path", is its specification.
//
//   client -> daemon   kPreface, then request frames
//   daemon -> client   kPreface (the daemon speaks the local path), then
//                      one answer frame per request frame, in order
//   frame              4-byte little-endian payload length, then the
//                      payload: a serialized jitd.v1.GetKernelRequest, or a
//                      serialized jitd.v1.LocalAnswer
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace jitd::local_wire {

// No HTTP/2 client starts so (its preface is "PRI * HTTP/2.0..."), which is
// how the daemon tells the two protocols apart on one socket.
inline constexpr std::string_view kPreface{"jitd/l1\n", 8};
inline constexpr size_t kHeaderBytes = 4;
// A request names a kernel, a few params and options: 64 KiB is far above
// any real one, and bounds what a connection makes the daemon buffer.
inline constexpr uint32_t kMaxRequestBytes = 64u << 10;
// An answer carries a cubin only when asked for BYTES; the daemon's cubins
// are bounded far below this.
inline constexpr uint32_t kMaxAnswerBytes = 512u << 20;

inline void AppendFrame(std::string_view payload, std::string* out) {
  const auto n = static_cast<uint32_t>(payload.size());
  const char header[kHeaderBytes] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                                     static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 24) & 0xff)};
  out->append(header, kHeaderBytes);
  out->append(payload);
}

// The payload length in a frame's first kHeaderBytes bytes.
inline uint32_t FrameLength(const char* header) {
  const auto byte = [&](int i) { return static_cast<uint32_t>(static_cast<unsigned char>(header[i])); };
  return byte(0) | (byte(1) << 8) | (byte(2) << 16) | (byte(3) << 24);
}

}  // namespace jitd::local_wire
