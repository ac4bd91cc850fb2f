// Client::Impl: the state behind jitd::Client, shared by client.cpp (the
// connection and the RPCs) and client_kernels.cpp (kernels: memo, path
// delivery, fallback, modules).
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "fallback_cache.h"
#include "grpc_status.h"
#include "jitd/client.h"
#include "jitd/v1/cache_admin.grpc.pb.h"
#include "jitd/v1/compiler.grpc.pb.h"
#include "single_flight_memo.h"

namespace jitd {

class Client::Impl {
 public:
  using Clock = std::chrono::system_clock;

  // `options` is resolved: endpoint, fallback_cache_dir and prefer_path set.
  Impl(ClientOptions options, std::shared_ptr<grpc::Channel> channel);

  // Waits for the channel to connect, failing at the first refused attempt
  // rather than retrying until the timeout.
  absl::Status AwaitConnected();

  // kAdmin: a CacheAdmin call that may change state (Evict, Verify), the
  // only calls that carry the admin token.
  enum class Call { kPlain, kAdmin };
  void Prepare(grpc::ClientContext* context, std::chrono::milliseconds timeout, Call call = Call::kPlain) const;

  // Runs one unary call: `invoke(context, response)` calls the stub.
  template <typename Response, typename Invoke>
  absl::StatusOr<Response> Unary(Invoke invoke, Call call = Call::kPlain) {
    grpc::ClientContext context;
    Prepare(&context, options_.call_timeout, call);
    Response response;
    const grpc::Status status = invoke(&context, &response);
    if (!status.ok()) return client_detail::FromGrpcStatus(status, endpoint());
    return response;
  }

  const std::string& endpoint() const { return options_.endpoint; }

  const ClientOptions options_;
  // Why Connect() could not read the daemon's token beside its socket (OK
  // when it did, or did not try).
  absl::Status socket_token_unread_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::CacheAdmin::Stub> admin_;
  std::unique_ptr<v1::Compiler::Stub> compiler_;

  // Kernels (client_kernels.cpp).
  client_detail::SingleFlightMemo<KernelBinary> binaries_;  // by CanonicalSpec
  client_detail::SingleFlightMemo<Module> modules_;         // by context ID + CanonicalSpec
  std::unique_ptr<client_detail::FallbackCache> fallback_;  // null without a fallback dir

  std::atomic<uint64_t> get_kernel_rpcs_{0};
  std::atomic<uint64_t> memo_hits_{0};
  std::atomic<uint64_t> fallback_answers_{0};
  std::atomic<uint64_t> module_loads_{0};
};

}  // namespace jitd
