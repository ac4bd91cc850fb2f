// jitd.v1.Compiler in a build without the kernel compiler: registered so
// that clients see the service (and reflection lists it), answering every
// call UNIMPLEMENTED with a message that says why.
#pragma once

#include "jitd/v1/compiler.grpc.pb.h"

namespace jitd::daemon {

class CompilerService final : public v1::Compiler::Service {
 public:
  grpc::Status GetKernel(grpc::ServerContext* context, const v1::GetKernelRequest* request,
                         v1::GetKernelResponse* response) override;
  grpc::Status Warm(grpc::ServerContext* context, const v1::WarmRequest* request,
                    grpc::ServerWriter<v1::WarmProgress>* writer) override;
  grpc::Status ListKernels(grpc::ServerContext* context, const v1::ListKernelsRequest* request,
                           v1::ListKernelsResponse* response) override;
};

}  // namespace jitd::daemon
