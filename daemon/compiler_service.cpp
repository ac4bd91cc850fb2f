#include "compiler_service.h"

namespace jitd::daemon {
namespace {

grpc::Status NotBuiltIn() {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      "this jitd build serves its cache only; the kernel compiler is not built in yet");
}

}  // namespace

grpc::Status CompilerService::GetKernel(grpc::ServerContext*, const v1::GetKernelRequest*, v1::GetKernelResponse*) {
  return NotBuiltIn();
}

grpc::Status CompilerService::Warm(grpc::ServerContext*, const v1::WarmRequest*,
                                   grpc::ServerWriter<v1::WarmProgress>*) {
  return NotBuiltIn();
}

grpc::Status CompilerService::ListKernels(grpc::ServerContext*, const v1::ListKernelsRequest*,
                                          v1::ListKernelsResponse*) {
  return NotBuiltIn();
}

}  // namespace jitd::daemon
