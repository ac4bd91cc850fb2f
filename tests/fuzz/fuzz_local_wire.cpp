// The local path's reading (local_wire::FrameReader), as the daemon's
// local server runs it on every connection: bytes from any client, in any
// pieces. Input: two control bytes, then the stream.
//
//   control[0]   bit 0: a preface is due (an ungreeted connection);
//                bit 1: the stream is an honest exchange made of the rest
//                (the preface and length-prefixed frames of its pieces),
//                else the rest as it is; bit 2: a small most-per-frame
//                (control[1]), else kMaxRequestBytes
//   control[1]   how the stream is cut: pieces of 1 + (the stream's own
//                bytes in turn, mod control[1] + 1) bytes
//
// Every split must give the units of the whole stream fed at once (an
// honest exchange: its own frames, in order); Ready() must say exactly
// whether Next() takes a unit, so that a caller who reads only while it
// is false never loops without progress; what it holds must stay one
// unfinished unit.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "jitd/base/local_wire.h"

namespace {

namespace wire = jitd::local_wire;

struct Taken {
  wire::Unit unit;
  std::string payload;
  uint32_t oversized_length;
  bool operator==(const Taken&) const = default;
};

// Takes every unit there is, checking the reader's promises on the way.
void Drain(wire::FrameReader& reader, uint32_t max_payload, std::vector<Taken>* taken) {
  while (true) {
    const bool ready = reader.Ready();
    const bool was_spent = reader.spent();
    const size_t held = reader.buffered();
    const wire::Unit unit = reader.Next();
    if (ready != (unit != wire::Unit::kNone)) std::abort();  // a caller waiting on bytes would spin or stall
    if (was_spent && unit != wire::Unit::kNone) std::abort();
    if (unit == wire::Unit::kNone) break;
    if (unit == wire::Unit::kFrame && reader.payload().size() > max_payload) std::abort();
    if (unit != wire::Unit::kNotPreface && unit != wire::Unit::kOversized && reader.buffered() >= held) {
      std::abort();  // a unit taken and nothing consumed
    }
    if ((unit == wire::Unit::kNotPreface || unit == wire::Unit::kOversized) &&
        (!reader.spent() || reader.buffered() != 0)) {
      std::abort();
    }
    taken->push_back(
        {unit, std::string(reader.payload()), unit == wire::Unit::kOversized ? reader.oversized_length() : 0});
  }
  // Waiting for bytes: what is held is one unfinished unit.
  const size_t most = reader.preface_due() ? wire::kPreface.size() : wire::kHeaderBytes + size_t{max_payload};
  if (reader.buffered() >= most) std::abort();
  if (reader.spent() && reader.buffered() != 0) std::abort();
}

std::vector<Taken> ReadCut(std::string_view stream, bool preface_due, uint32_t max_payload, uint8_t modulus) {
  wire::FrameReader reader(preface_due, max_payload);
  std::vector<Taken> taken;
  size_t at = 0, turn = 0;
  while (at < stream.size()) {
    const size_t piece = modulus == 0 ? 1 : 1 + static_cast<uint8_t>(stream[turn++ % stream.size()]) % (modulus + 1u);
    const std::string_view bytes = stream.substr(at, piece);
    reader.Feed(bytes);
    at += bytes.size();
    Drain(reader, max_payload, &taken);
  }
  reader.Feed({});
  Drain(reader, max_payload, &taken);
  return taken;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t flags = data[0], cut = data[1];
  const std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  const bool preface_due = (flags & 1) != 0;
  const bool honest = (flags & 2) != 0;
  const uint32_t max_payload = (flags & 4) != 0 ? cut : wire::kMaxRequestBytes;

  std::string stream;
  std::vector<Taken> expected;
  if (honest) {
    // Pieces of the rest: a length byte, then up to that many bytes (at
    // most max_payload of them).
    if (preface_due) {
      stream.append(wire::kPreface);
      expected.push_back({wire::Unit::kWholePreface, "", 0});
    }
    for (size_t at = 0; at < rest.size();) {
      const size_t length = std::min<size_t>(static_cast<uint8_t>(rest[at]) % (max_payload + 1u), rest.size() - at - 1);
      const std::string_view payload = rest.substr(at + 1, length);
      wire::AppendFrame(payload, &stream);
      expected.push_back({wire::Unit::kFrame, std::string(payload), 0});
      at += 1 + length;
    }
  } else {
    stream.assign(rest);
  }

  // Whole, in the pieces the control byte makes, and byte by byte.
  const std::vector<Taken> whole = ReadCut(stream, preface_due, max_payload, 255);
  if (stream.size() <= 256 && ReadCut(stream, preface_due, max_payload, 0) != whole) std::abort();
  {
    wire::FrameReader reader(preface_due, max_payload);
    std::vector<Taken> at_once;
    reader.Feed(stream);
    Drain(reader, max_payload, &at_once);
    if (at_once != whole) std::abort();
  }
  if (ReadCut(stream, preface_due, max_payload, cut) != whole) std::abort();
  if (honest && whole != expected) std::abort();
  return 0;
}
