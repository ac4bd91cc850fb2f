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
//
// FrameReader is a reader's half of it as a pure state machine: the daemon
// feeds it each connection's bytes as they arrive, and the fuzzer
// (tests/fuzz/fuzz_local_wire.cpp) feeds it any bytes in any pieces.
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

// What FrameReader::Next() took from the bytes fed so far.
enum class Unit {
  kNone,          // no whole preface or frame yet: more bytes are needed
  kWholePreface,  // the preface, whole (the reader expects frames from now on)
  kFrame,         // a whole frame; its payload is FrameReader::payload()
  kOversized,     // a frame header naming more than the most: the stream ends here
  kNotPreface,    // bytes that are not (a start of) the preface: the stream ends here
};

// One stream's units, read from bytes that come in any pieces: the
// preface (when one is due), then length-prefixed frames. No I/O, no clock:
// every split of the same bytes yields the same units, and a caller that
// reads more bytes only while Ready() is false never loops without
// progress, for Ready() is true exactly when Next() takes a unit.
//
// What it holds is bounded by its caller: an unfinished unit is at most
// kHeaderBytes + max_payload - 1 bytes (a header naming more ends the
// stream at once), plus what one Feed() adds beyond it. After kOversized
// or kNotPreface it is spent: it takes no more bytes and yields nothing.
//
// Not thread-safe; one per connection.
class FrameReader {
 public:
  // `preface_due`: the stream starts with kPreface (the daemon's reading
  // of a connection whose preface nobody has read yet).
  FrameReader(bool preface_due, uint32_t max_payload) : preface_due_(preface_due), max_payload_(max_payload) {}

  // Appends bytes as they came; ignored once spent. Invalidates payload().
  void Feed(std::string_view bytes);
  // Whether Next() would take a unit: a whole preface or frame, or bytes
  // that end the stream. While it is, more bytes are not needed; while it
  // is not (and the reader is not spent), nothing happens until more come.
  bool Ready() const { return Peek() != Unit::kNone; }
  // Takes the next unit, kNone when there is none yet (or the reader is
  // spent).
  Unit Next();
  // The payload of the frame the last Next() took; valid until the next
  // Feed() or Next().
  std::string_view payload() const { return payload_; }
  // The length the header of an oversized frame named (after kOversized).
  uint32_t oversized_length() const { return oversized_length_; }

  // Whether the preface is still to come.
  bool preface_due() const { return preface_due_; }
  // Bytes held that no unit has taken yet: an unfinished preface or frame,
  // or whole ones still to be taken.
  size_t buffered() const { return buffer_.size() - at_; }
  // After kOversized or kNotPreface.
  bool spent() const { return spent_; }

 private:
  Unit Peek() const;

  bool preface_due_;
  const uint32_t max_payload_;
  bool spent_ = false;
  std::string buffer_;
  size_t at_ = 0;  // bytes of buffer_ taken by units already
  std::string_view payload_;
  uint32_t oversized_length_ = 0;
};

}  // namespace jitd::local_wire
