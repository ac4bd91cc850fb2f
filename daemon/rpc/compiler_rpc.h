// jitd.v1.Compiler over serving::KernelService: the wire half of the
// request path. Each RPC converts the request, calls the service once and
// converts the answer; errors go through ToGrpcStatus (grpc_status.h), so
// their codes and messages are the service's, unchanged.
//
//   GetKernel    one request: the caller's deadline and cancellation reach
//                the service, so a caller that gives up stops waiting (and a
//                compile nobody else wants is cancelled).
//   Warm         many requests at warm priority (live GetKernel calls go
//                first), a bounded number at once, one WarmProgress per
//                finished item; stops when the caller cancels the stream.
//                The manifest instantiations it warms (no extra options)
//                are pinned: ad-hoc entries never evict them.
//   ListKernels  the manifest the service resolves with right now, a page
//                of at most 4096 kernels at a time (page_token: the next);
//                each kernel's instantiations counted, never listed
//                (kernel_listing_rpc.cpp).
//   AnswerLocal  a cache hit for the local path (local_server.h).
//
// Thread safety: gRPC calls every method from its own threads, concurrently.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "jitd/v1/compiler.grpc.pb.h"
#include "rpc/daemon_metrics.h"
#include "rpc/in_flight_calls.h"
#include "serving/fatbin_assembly.h"
#include "serving/kernel_service.h"

namespace jitd::daemon {

manifest::KernelRequest ToKernelRequest(const std::string& kernel,
                                        const google::protobuf::Map<std::string, std::string>& params,
                                        const std::string& arch,
                                        const google::protobuf::RepeatedPtrField<std::string>& options);
// The whole request, its ad-hoc module spec included.
manifest::KernelRequest ToKernelRequest(const v1::GetKernelRequest& request);
v1::GetKernelResponse::Source SourceOf(serving::Origin origin);

class CompilerRpc final : public v1::Compiler::Service {
 public:
  struct Options {
    // Warm's concurrency when the request says 0: the worker count, which
    // keeps every worker busy without queueing more than it can run.
    size_t workers = 1;
    // Log one line per cache hit (every compile is logged by the service).
    bool log_hits = false;
    // Who a gRPC peer name stands for ("fd:N" of a Unix connection: its
    // user, see unix_acceptor.h); unset = the name itself.
    std::function<std::string(const std::string&)> peer_of;
    // Where GetKernel outcomes and latencies are counted; null = nowhere.
    DaemonMetrics* metrics = nullptr;
  };

  // `service` and `calls` (which counts each call while it runs) must
  // outlive this object.
  CompilerRpc(serving::KernelService& service, InFlightCalls& calls, Options options);

  grpc::Status GetKernel(grpc::ServerContext* context, const v1::GetKernelRequest* request,
                         v1::GetKernelResponse* response) override;
  grpc::Status Warm(grpc::ServerContext* context, const v1::WarmRequest* request,
                    grpc::ServerWriter<v1::WarmProgress>* writer) override;
  grpc::Status ListKernels(grpc::ServerContext* context, const v1::ListKernelsRequest* request,
                           v1::ListKernelsResponse* response) override;

  // One request of the local path (local_server.h) from `peer`, on its one
  // thread: a CACHED_ONLY request answered from memory or disk only
  // (KernelService::Find), never waiting; NOT_FOUND for anything else there
  // (a miss, a request the resolver rejects), which the client asks again
  // over gRPC; INVALID_ARGUMENT for another mode.
  v1::LocalAnswer AnswerLocal(const v1::GetKernelRequest& request, const std::string& peer);

 private:
  serving::KernelService& service_;
  InFlightCalls& calls_;
  const Options options_;

  grpc::Status GetKernelCounted(grpc::ServerContext* context, const v1::GetKernelRequest* request,
                                v1::GetKernelResponse* response, serving::Origin* origin);
  // GetKernel with `archs` or `fleet` (fatbin_rpc.cpp), answered by
  // serving::FatbinAssembly.
  grpc::Status GetFatbin(const v1::GetKernelRequest& request, serving::Mode mode, const serving::CallContext& call,
                         v1::GetKernelResponse* response, serving::Origin* origin);
  std::string PeerOf(const grpc::ServerContext& context) const;

  serving::FatbinAssembly fatbins_;
};

}  // namespace jitd::daemon
