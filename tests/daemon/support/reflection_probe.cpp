#include "reflection_probe.h"

#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/byte_buffer.h>

#include <chrono>
#include <vector>

namespace jitd::testing {
namespace {

constexpr char kMethod[] = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
// ServerReflectionRequest{list_services: ""}: field 7, length-delimited, empty.
constexpr char kListServicesRequest[] = {0x3a, 0x00};

// Runs one step of the async call and waits for it.
bool Step(grpc::CompletionQueue& queue) {
  void* tag = nullptr;
  bool ok = false;
  return queue.Next(&tag, &ok) && ok;
}

}  // namespace

absl::StatusOr<std::string> ListServicesByReflection(const std::string& endpoint) {
  auto channel = grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue queue;
  auto call = stub.PrepareCall(&context, kMethod, &queue);
  int tag = 0;
  call->StartCall(&tag);
  if (!Step(queue)) return absl::UnavailableError("reflection call did not start");
  grpc::Slice request_slice(kListServicesRequest, sizeof(kListServicesRequest));
  const grpc::ByteBuffer request(&request_slice, 1);
  call->Write(request, &tag);
  if (!Step(queue)) return absl::UnavailableError("reflection request not sent");
  call->WritesDone(&tag);
  Step(queue);
  grpc::ByteBuffer response;
  call->Read(&response, &tag);
  const bool got = Step(queue);
  grpc::Status status;
  call->Finish(&status, &tag);
  Step(queue);
  queue.Shutdown();
  void* ignored_tag = nullptr;
  bool ignored_ok = false;
  while (queue.Next(&ignored_tag, &ignored_ok)) {
  }
  if (!got) {
    return absl::UnavailableError("no reflection response: " + status.error_message());
  }
  std::vector<grpc::Slice> slices;
  (void)response.Dump(&slices);
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

}  // namespace jitd::testing
