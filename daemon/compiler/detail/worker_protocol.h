// The wire between WorkerPool and a compile worker (a socketpair): frames of
// a u32 little-endian payload length followed by the payload. A payload is
// one type byte and that message's fields, little-endian, no padding:
//
//   u8/u32/u64/i64   fixed width, little-endian; f64 as its IEEE-754 bits (u64)
//   str              u32 byte count, then the bytes
//   list<T>          u32 element count, then the elements
//
//   kHello     pool -> worker  u32 magic, u32 version
//   kHelloAck  worker -> pool  u32 magic, u32 version, u32 pid, u32 nvrtc major, u32 nvrtc minor
//   kCompile   pool -> worker  u64 job id, str program name, str source,
//                              list<(str name, str path, str content)> headers, list<str> options,
//                              list<str> name expressions, u8 use_pch, i64 timeout ms,
//                              str digest, str log root
//   kCancel    pool -> worker  u64 job id
//   kResult    worker -> pool  u64 job id, u32 absl::StatusCode, str message, str log,
//                              str cubin, list<(str, str)> lowered names, f64 compile ms, u8 used_pch
//
// A compile request carries the job's digest (JobDigest); the worker
// recomputes it over what it decoded and answers DATA_LOSS without compiling
// when they differ. Version 2: headers, digest and log root added.
//
// One compile is in flight per worker; kCancel names it by id so that a late
// cancel cannot hit the next job. Decoders check every length against the
// bytes left and reject trailing bytes: a corrupt frame is an error, never a
// crash or a huge allocation. Both ends come from one build, so a version
// mismatch is a hard error at the handshake, not a negotiation.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/compile_job.h"

namespace jitd::compiler::detail {

inline constexpr std::uint32_t kProtocolMagic = 0x5754494a;  // "JITW"
inline constexpr std::uint32_t kProtocolVersion = 3;         // 3: artifact kind, module build
// Largest payload either end accepts: a corrupt length must not make the
// reader allocate gigabytes. Real frames are a source (KBs) or a cubin (MBs).
inline constexpr std::uint32_t kMaxFrameBytes = 256u << 20;
inline constexpr size_t kFrameHeaderBytes = 4;

enum class MessageType : std::uint8_t {
  kHello = 1,
  kHelloAck = 2,
  kCompile = 3,
  kCancel = 4,
  kResult = 5,
};

struct Hello {
  std::uint32_t version = kProtocolVersion;
};
struct HelloAck {
  std::uint32_t version = kProtocolVersion;
  std::uint32_t pid = 0;
  std::uint32_t nvrtc_major = 0;
  std::uint32_t nvrtc_minor = 0;
};
struct CompileRequest {
  std::uint64_t job_id = 0;
  CompileJob job;
};
struct CancelRequest {
  std::uint64_t job_id = 0;
};
struct CompileResponse {
  std::uint64_t job_id = 0;
  // OK, or the compile's error (with the NVRTC log attached, see NvrtcLogOf).
  absl::Status status;
  // Meaningful only when status is OK (the log travels either way).
  CompileResult result;
};

// Payload encoders (no length prefix; see Framed).
std::string Encode(const Hello& message);
std::string Encode(const HelloAck& message);
std::string Encode(const CompileRequest& message);
std::string Encode(const CancelRequest& message);
std::string Encode(const CompileResponse& message);

// The payload's type, or INVALID_ARGUMENT if it is empty or unknown.
absl::StatusOr<MessageType> TypeOf(std::string_view payload);
// Decoders: INVALID_ARGUMENT for a wrong type, a short or overlong payload,
// a bad magic or an out-of-range value.
absl::StatusOr<Hello> DecodeHello(std::string_view payload);
absl::StatusOr<HelloAck> DecodeHelloAck(std::string_view payload);
absl::StatusOr<CompileRequest> DecodeCompileRequest(std::string_view payload);
absl::StatusOr<CancelRequest> DecodeCancelRequest(std::string_view payload);
absl::StatusOr<CompileResponse> DecodeCompileResponse(std::string_view payload);

// `payload` with its length prefix, ready to write.
std::string Framed(std::string_view payload);

// Accumulates bytes read from a stream and splits them into payloads.
class FrameParser {
 public:
  void Append(const char* data, size_t size);
  // The next complete payload, nullopt if more bytes are needed, or
  // INVALID_ARGUMENT if the stream announced a frame over kMaxFrameBytes
  // (the stream is then unusable).
  absl::StatusOr<std::optional<std::string>> Next();
  // Bytes of an incomplete frame held back.
  size_t pending_bytes() const { return buffer_.size() - consumed_; }

 private:
  std::string buffer_;
  size_t consumed_ = 0;
};

// Blocking I/O on a connected stream socket (the worker's side). WriteFrame
// never raises SIGPIPE (MSG_NOSIGNAL); it returns UNAVAILABLE if the peer is
// gone. ReadFrame returns nullopt on a clean EOF between frames, UNAVAILABLE
// on EOF inside a frame or a read error, INVALID_ARGUMENT on an oversized
// length.
absl::Status WriteFrame(int fd, std::string_view payload);
absl::StatusOr<std::optional<std::string>> ReadFrame(int fd);

}  // namespace jitd::compiler::detail
