#include "src/health_check.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include <string>
#include <vector>

#include "jitd/base/status.h"
#include "src/grpc_status.h"

namespace jitd::client_detail {
namespace {

constexpr char kCheckMethod[] = "/grpc.health.v1.Health/Check";
// HealthCheckResponse { ServingStatus status = 1; }, SERVING = 1.
constexpr uint32_t kStatusFieldTag = (1 << 3) | 0;  // field 1, varint
constexpr uint64_t kServing = 1;

// The `status` field of an encoded HealthCheckResponse (0 = UNKNOWN when
// absent, as proto3 omits defaults).
absl::StatusOr<uint64_t> DecodeServingStatus(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return absl::InternalError("unreadable health response");
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  google::protobuf::io::CodedInputStream input(reinterpret_cast<const uint8_t*>(bytes.data()),
                                               static_cast<int>(bytes.size()));
  uint64_t serving_status = 0;
  while (const uint32_t tag = input.ReadTag()) {
    if (tag == kStatusFieldTag) {
      if (!input.ReadVarint64(&serving_status)) break;
    } else if (!google::protobuf::internal::WireFormatLite::SkipField(&input, tag)) {
      return absl::InternalError("malformed health response");
    }
  }
  return serving_status;
}

}  // namespace

absl::StatusOr<bool> CheckServing(const std::shared_ptr<grpc::Channel>& channel, std::string_view endpoint,
                                  std::chrono::milliseconds timeout, bool wait_for_ready) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  context.set_wait_for_ready(wait_for_ready);
  grpc::CompletionQueue queue;
  grpc::Slice empty_message("");  // HealthCheckRequest{service: ""}
  const grpc::ByteBuffer request(&empty_message, 1);
  auto call = stub.PrepareUnaryCall(&context, kCheckMethod, request, &queue);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  int finish_tag = 0;
  call->Finish(&response, &status, &finish_tag);
  void* tag = nullptr;
  bool ok = false;
  queue.Next(&tag, &ok);
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  if (!status.ok()) return FromGrpcCall(status, endpoint);
  JITD_ASSIGN_OR_RETURN(uint64_t serving_status, DecodeServingStatus(response));
  return serving_status == kServing;
}

}  // namespace jitd::client_detail
