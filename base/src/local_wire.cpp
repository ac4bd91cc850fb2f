#include "jitd/base/local_wire.h"

#include <algorithm>

namespace jitd::local_wire {

void FrameReader::Feed(std::string_view bytes) {
  if (spent_) return;
  // Taken units go first, so that what is held stays one unfinished unit
  // (and the bytes just fed).
  buffer_.erase(0, at_);
  at_ = 0;
  payload_ = {};
  buffer_.append(bytes);
}

Unit FrameReader::Peek() const {
  if (spent_) return Unit::kNone;
  const std::string_view rest = std::string_view(buffer_).substr(at_);
  if (preface_due_) {
    // Judged byte by byte: a stream that goes wrong in its first bytes
    // ends there, not when the preface's length has arrived.
    const size_t n = std::min(rest.size(), kPreface.size());
    if (rest.substr(0, n) != kPreface.substr(0, n)) return Unit::kNotPreface;
    return n == kPreface.size() ? Unit::kWholePreface : Unit::kNone;
  }
  if (rest.size() < kHeaderBytes) return Unit::kNone;
  const uint32_t length = FrameLength(rest.data());
  if (length > max_payload_) return Unit::kOversized;
  return rest.size() - kHeaderBytes >= length ? Unit::kFrame : Unit::kNone;
}

Unit FrameReader::Next() {
  payload_ = {};
  const Unit unit = Peek();
  switch (unit) {
    case Unit::kNone:
      break;
    case Unit::kWholePreface:
      at_ += kPreface.size();
      preface_due_ = false;
      break;
    case Unit::kFrame: {
      const uint32_t length = FrameLength(buffer_.data() + at_);
      payload_ = std::string_view(buffer_).substr(at_ + kHeaderBytes, length);
      at_ += kHeaderBytes + length;
      break;
    }
    case Unit::kOversized:
      oversized_length_ = FrameLength(buffer_.data() + at_);
      [[fallthrough]];
    case Unit::kNotPreface:
      spent_ = true;
      buffer_.clear();
      buffer_.shrink_to_fit();
      at_ = 0;
      break;
  }
  return unit;
}

}  // namespace jitd::local_wire
