// The local path's framing, shared by the daemon (daemon/rpc/local_server.h)
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

#include "jitd/base/coding.h"

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
  coding::PutFixed32(out, static_cast<uint32_t>(payload.size()));
  out->append(payload);
}

// The payload length in a frame's first kHeaderBytes bytes.
inline uint32_t FrameLength(const char* header) { return coding::DecodeFixed32(header); }

}  // namespace jitd::local_wire
