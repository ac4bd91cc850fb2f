#include "compiler/detail/worker_protocol.h"

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "compiler/nvrtc_program.h"
#include "jitd/base/coding.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"

namespace jitd::compiler::detail {
namespace {

// Highest absl::StatusCode value (kUnauthenticated).
constexpr std::uint32_t kMaxStatusCode = 16;

class Writer {
 public:
  explicit Writer(MessageType type) { out_.push_back(static_cast<char>(type)); }
  void U8(std::uint8_t value) { out_.push_back(static_cast<char>(value)); }
  void U32(std::uint32_t value) { coding::PutFixed32(&out_, value); }
  void U64(std::uint64_t value) { coding::PutFixed64(&out_, value); }
  void I64(std::int64_t value) { U64(static_cast<std::uint64_t>(value)); }
  void F64(double value) { U64(std::bit_cast<std::uint64_t>(value)); }
  void Str(std::string_view value) {
    U32(static_cast<std::uint32_t>(value.size()));
    out_.append(value);
  }
  void StrList(const std::vector<std::string>& values) {
    U32(static_cast<std::uint32_t>(values.size()));
    for (const std::string& value : values) Str(value);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads fields off a payload; the first failure sticks and every later read
// returns a zero value, so a decoder checks ok() once at the end.
class Reader {
 public:
  Reader(std::string_view payload, MessageType expected) : data_(payload) {
    if (data_.empty() || static_cast<std::uint8_t>(data_[0]) != static_cast<std::uint8_t>(expected)) {
      Fail("unexpected message type");
    } else {
      pos_ = 1;
    }
  }
  std::uint8_t U8() { return Fixed<std::uint8_t>(); }
  std::uint32_t U32() { return Fixed<std::uint32_t>(); }
  std::uint64_t U64() { return Fixed<std::uint64_t>(); }
  std::int64_t I64() { return static_cast<std::int64_t>(U64()); }
  double F64() { return std::bit_cast<double>(U64()); }
  bool Bool() {
    const std::uint8_t value = U8();
    if (value > 1) Fail("boolean out of range");
    return value == 1;
  }
  std::string Str() {
    const std::uint32_t size = U32();
    if (!Need(size)) return {};
    std::string value(data_.substr(pos_, size));
    pos_ += size;
    return value;
  }
  // A list count, checked against the bytes left (each element takes at
  // least `min_element_bytes`) before anything is allocated for it.
  std::uint32_t Count(size_t min_element_bytes) {
    const std::uint32_t count = U32();
    if (ok_ && count > (data_.size() - pos_) / min_element_bytes) {
      Fail("list count exceeds the payload");
      return 0;
    }
    return count;
  }
  std::vector<std::string> StrList() {
    std::vector<std::string> values(Count(4));
    for (std::string& value : values) value = Str();
    return values;
  }
  void Fail(const std::string& why) {
    if (ok_) error_ = why;
    ok_ = false;
  }
  // OK if every read succeeded and the payload had nothing left over.
  absl::Status Finish(const char* what) {
    if (ok_ && pos_ != data_.size()) Fail("trailing bytes");
    if (ok_) return absl::OkStatus();
    return absl::InvalidArgumentError(text::Cat("malformed ", what, " frame: ", error_));
  }

 private:
  bool Need(size_t bytes) {
    if (!ok_) return false;
    if (data_.size() - pos_ < bytes) {
      Fail("truncated");
      return false;
    }
    return true;
  }
  template <typename T>
  T Fixed() {
    if (!Need(sizeof(T))) return 0;
    const T value = coding::DecodeFixed<T>(data_.data() + pos_);
    pos_ += sizeof(T);
    return value;
  }

  std::string_view data_;
  size_t pos_ = 0;
  bool ok_ = true;
  std::string error_;
};

std::uint32_t LoadU32(const char* bytes) { return coding::DecodeFixed32(bytes); }

absl::Status OversizedFrame(std::uint32_t size) {
  return absl::InvalidArgumentError(text::Cat("frame of ", size, " bytes exceeds the limit of ", kMaxFrameBytes));
}

}  // namespace

std::string Encode(const Hello& message) {
  Writer w(MessageType::kHello);
  w.U32(kProtocolMagic);
  w.U32(message.version);
  return w.Take();
}

std::string Encode(const HelloAck& message) {
  Writer w(MessageType::kHelloAck);
  w.U32(kProtocolMagic);
  w.U32(message.version);
  w.U32(message.pid);
  w.U32(message.nvrtc_major);
  w.U32(message.nvrtc_minor);
  return w.Take();
}

std::string Encode(const CompileRequest& message) {
  Writer w(MessageType::kCompile);
  w.U64(message.job_id);
  w.Str(message.job.program_name);
  w.Str(message.job.source);
  w.U32(static_cast<std::uint32_t>(message.job.headers.size()));
  for (const CompileHeader& header : message.job.headers) {
    w.Str(header.name);
    w.Str(header.path);
    w.Str(header.content);
  }
  w.StrList(message.job.options);
  w.StrList(message.job.name_expressions);
  w.U8(message.job.use_pch ? 1 : 0);
  w.I64(message.job.timeout.count());
  w.Str(message.job.digest);
  w.Str(message.job.log_root);
  w.U8(static_cast<std::uint8_t>(message.job.kind));
  w.Str(message.job.module.nvcc);
  w.Str(message.job.module.host_cxx);
  w.StrList(message.job.module.compile_options);
  w.StrList(message.job.module.link_options);
  w.StrList(message.job.module.read_roots);
  w.Str(message.job.module.unavailable);
  return w.Take();
}

std::string Encode(const CancelRequest& message) {
  Writer w(MessageType::kCancel);
  w.U64(message.job_id);
  return w.Take();
}

std::string Encode(const CompileResponse& message) {
  Writer w(MessageType::kResult);
  w.U64(message.job_id);
  w.U32(static_cast<std::uint32_t>(message.status.code()));
  w.Str(std::string(message.status.message()));
  // On failure the log is the one attached to the status; on success the result's.
  w.Str(message.status.ok() ? message.result.log : NvrtcLogOf(message.status).value_or(""));
  w.Str(message.result.cubin);
  w.U32(static_cast<std::uint32_t>(message.result.lowered_names.size()));
  for (const auto& [name, lowered] : message.result.lowered_names) {
    w.Str(name);
    w.Str(lowered);
  }
  w.F64(message.result.compile_ms);
  w.U8(message.result.used_pch ? 1 : 0);
  return w.Take();
}

absl::StatusOr<MessageType> TypeOf(std::string_view payload) {
  if (payload.empty()) return absl::InvalidArgumentError("empty frame");
  const auto type = static_cast<std::uint8_t>(payload[0]);
  if (type < static_cast<std::uint8_t>(MessageType::kHello) || type > static_cast<std::uint8_t>(MessageType::kResult)) {
    return absl::InvalidArgumentError(text::Cat("unknown message type ", type));
  }
  return static_cast<MessageType>(type);
}

absl::StatusOr<Hello> DecodeHello(std::string_view payload) {
  Reader r(payload, MessageType::kHello);
  if (r.U32() != kProtocolMagic) r.Fail("bad magic: the peer is not a jitd compile worker");
  Hello message;
  message.version = r.U32();
  JITD_RETURN_IF_ERROR(r.Finish("hello"));
  return message;
}

absl::StatusOr<HelloAck> DecodeHelloAck(std::string_view payload) {
  Reader r(payload, MessageType::kHelloAck);
  if (r.U32() != kProtocolMagic) r.Fail("bad magic: the peer is not a jitd compile worker");
  HelloAck message;
  message.version = r.U32();
  message.pid = r.U32();
  message.nvrtc_major = r.U32();
  message.nvrtc_minor = r.U32();
  JITD_RETURN_IF_ERROR(r.Finish("hello-ack"));
  return message;
}

absl::StatusOr<CompileRequest> DecodeCompileRequest(std::string_view payload) {
  Reader r(payload, MessageType::kCompile);
  CompileRequest message;
  message.job_id = r.U64();
  message.job.program_name = r.Str();
  message.job.source = r.Str();
  message.job.headers.resize(r.Count(12));
  for (CompileHeader& header : message.job.headers) {
    header.name = r.Str();
    header.path = r.Str();
    header.content = r.Str();
  }
  message.job.options = r.StrList();
  message.job.name_expressions = r.StrList();
  message.job.use_pch = r.Bool();
  const std::int64_t timeout_ms = r.I64();
  if (timeout_ms < 0) r.Fail("negative timeout");
  message.job.timeout = std::chrono::milliseconds(timeout_ms);
  message.job.digest = r.Str();
  message.job.log_root = r.Str();
  const std::uint8_t kind = r.U8();
  if (kind > static_cast<std::uint8_t>(ArtifactKind::kSharedObject)) r.Fail("unknown artifact kind");
  message.job.kind = static_cast<ArtifactKind>(kind);
  message.job.module.nvcc = r.Str();
  message.job.module.host_cxx = r.Str();
  message.job.module.compile_options = r.StrList();
  message.job.module.link_options = r.StrList();
  message.job.module.read_roots = r.StrList();
  message.job.module.unavailable = r.Str();
  JITD_RETURN_IF_ERROR(r.Finish("compile"));
  return message;
}

absl::StatusOr<CancelRequest> DecodeCancelRequest(std::string_view payload) {
  Reader r(payload, MessageType::kCancel);
  CancelRequest message;
  message.job_id = r.U64();
  JITD_RETURN_IF_ERROR(r.Finish("cancel"));
  return message;
}

absl::StatusOr<CompileResponse> DecodeCompileResponse(std::string_view payload) {
  Reader r(payload, MessageType::kResult);
  CompileResponse message;
  message.job_id = r.U64();
  const std::uint32_t code = r.U32();
  if (code > kMaxStatusCode) r.Fail("status code out of range");
  std::string status_message = r.Str();
  std::string log = r.Str();
  message.result.cubin = r.Str();
  const std::uint32_t names = r.Count(8);
  message.result.lowered_names.reserve(names);
  for (std::uint32_t i = 0; i < names; ++i) {
    std::string name = r.Str();
    std::string lowered = r.Str();
    message.result.lowered_names.emplace_back(std::move(name), std::move(lowered));
  }
  message.result.compile_ms = r.F64();
  message.result.used_pch = r.Bool();
  JITD_RETURN_IF_ERROR(r.Finish("result"));
  if (code == 0) {
    if (message.result.cubin.empty()) return absl::InvalidArgumentError("malformed result frame: OK without a cubin");
    message.result.log = std::move(log);
  } else {
    message.status = absl::Status(static_cast<absl::StatusCode>(code), status_message);
    if (!log.empty()) message.status = WithNvrtcLog(std::move(message.status), log);
  }
  return message;
}

std::string Framed(std::string_view payload) {
  std::string frame;
  frame.reserve(kFrameHeaderBytes + payload.size());
  coding::PutFixed32(&frame, static_cast<std::uint32_t>(payload.size()));
  frame.append(payload);
  return frame;
}

void FrameParser::Append(const char* data, size_t size) {
  if (consumed_ > 0 && consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
  }
  buffer_.append(data, size);
}

absl::StatusOr<std::optional<std::string>> FrameParser::Next() {
  if (pending_bytes() < kFrameHeaderBytes) return std::nullopt;
  const std::uint32_t size = LoadU32(buffer_.data() + consumed_);
  if (size > kMaxFrameBytes) return OversizedFrame(size);
  if (pending_bytes() - kFrameHeaderBytes < size) return std::nullopt;
  std::string payload = buffer_.substr(consumed_ + kFrameHeaderBytes, size);
  consumed_ += kFrameHeaderBytes + size;
  // Compact once the consumed prefix dominates, so a long-lived parser does
  // not keep every frame it ever saw.
  if (consumed_ > (1u << 20) && consumed_ * 2 > buffer_.size()) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  return payload;
}

absl::Status WriteFrame(int fd, std::string_view payload) {
  if (payload.size() > kMaxFrameBytes) return OversizedFrame(static_cast<std::uint32_t>(payload.size()));
  const std::string frame = Framed(payload);
  size_t sent = 0;
  while (sent < frame.size()) {
    const ssize_t n = send(fd, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(text::Cat("write to the peer failed: ", std::strerror(errno)));
    }
    sent += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

namespace {
// Reads exactly `size` bytes; false with `*eof_at_start` set on EOF before
// the first byte.
absl::Status ReadExactly(int fd, char* out, size_t size, bool* eof_at_start) {
  size_t got = 0;
  *eof_at_start = false;
  while (got < size) {
    const ssize_t n = read(fd, out + got, size - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(text::Cat("read from the peer failed: ", std::strerror(errno)));
    }
    if (n == 0) {
      if (got == 0) {
        *eof_at_start = true;
        return absl::OkStatus();
      }
      return absl::UnavailableError("the peer closed the connection inside a frame");
    }
    got += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<std::optional<std::string>> ReadFrame(int fd) {
  std::array<char, kFrameHeaderBytes> header{};
  bool eof = false;
  JITD_RETURN_IF_ERROR(ReadExactly(fd, header.data(), header.size(), &eof));
  if (eof) return std::nullopt;
  const std::uint32_t size = LoadU32(header.data());
  if (size > kMaxFrameBytes) return OversizedFrame(size);
  std::string payload(size, '\0');
  JITD_RETURN_IF_ERROR(ReadExactly(fd, payload.data(), size, &eof));
  if (eof && size > 0) return absl::UnavailableError("the peer closed the connection inside a frame");
  return payload;
}

}  // namespace jitd::compiler::detail
