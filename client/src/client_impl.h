// Client::Impl: the state behind jitd::Client, shared by client.cpp (the
// connection and the RPCs) and client_kernels.cpp (kernels: memo, path
// delivery, fallback, modules).
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/security/credentials.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "jitd/client.h"
#include "jitd/v1/cache_admin.grpc.pb.h"
#include "jitd/v1/compiler.grpc.pb.h"
#include "src/grpc_status.h"
#include "src/local_channel.h"
#include "src/single_flight_memo.h"

namespace jitd {

class Client::Impl {
 public:
  using Clock = std::chrono::system_clock;

  // `options` is resolved: endpoint, fallback_cache_dir, prefer_path and
  // local_path set. The gRPC channel is made from `credentials` (null:
  // insecure) when first needed: a client whose requests the local path
  // answers never pays for it.
  Impl(ClientOptions options, std::shared_ptr<grpc::ChannelCredentials> credentials);

  // Waits for the channel to connect, failing at the first refused attempt
  // rather than retrying until the timeout.
  absl::Status AwaitConnected();

  const std::shared_ptr<grpc::Channel>& channel();
  v1::Compiler::Stub& compiler();
  v1::CacheAdmin::Stub& admin();

  // One request over the local path (options_.local_path), opening its
  // connection first when there is none: UNAVAILABLE when the path cannot
  // be used now (no connection, an older daemon, a broken connection), for
  // the caller to use gRPC instead, unless `refused` is set: the daemon
  // refused the connection (a bound; the message says which), as it would
  // refuse gRPC's. After a failed open the path is not tried again for
  // kLocalRetry.
  absl::StatusOr<v1::LocalAnswer> AskLocal(const v1::GetKernelRequest& request, bool* refused);
  // Connect(): keeps the local path's connection Connect() opened (its
  // preface sent, so that the daemon answered while Connect did the rest)
  // once the daemon's preface is read by `deadline`; OK when it is open;
  // `*refusal` is the daemon's reason when it refused the connection.
  absl::Status AwaitLocal(absl::StatusOr<std::unique_ptr<client_detail::LocalChannel>> opened,
                          std::chrono::steady_clock::time_point deadline, std::string* refusal);

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
    if (!status.ok()) return client_detail::FromGrpcCall(status, endpoint());
    return response;
  }

  const std::string& endpoint() const { return options_.endpoint; }

  const ClientOptions options_;
  // Why Connect() could not read the daemon's token beside its socket (OK
  // when it did, or did not try).
  absl::Status socket_token_unread_;

  // Kernels over the local path (local_channel.h).
  static constexpr std::chrono::seconds kLocalRetry{2};
  std::atomic<uint64_t> local_answers_{0};

  // Kernels (client_kernels.cpp).
  client_detail::SingleFlightMemo<KernelBinary> binaries_;  // by CanonicalSpec
  client_detail::SingleFlightMemo<Module> modules_;         // by context ID + CanonicalSpec
  std::unique_ptr<KernelFallback> fallback_;                // null without a fallback dir

  std::atomic<uint64_t> get_kernel_rpcs_{0};
  std::atomic<uint64_t> memo_hits_{0};
  std::atomic<uint64_t> fallback_answers_{0};
  std::atomic<uint64_t> module_loads_{0};

 private:
  // Needs local_mu_.
  absl::Status OpenLocalLocked(std::chrono::steady_clock::time_point now);

  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  std::once_flag channel_once_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::CacheAdmin::Stub> admin_;
  std::unique_ptr<v1::Compiler::Stub> compiler_;

  std::mutex local_mu_;
  std::unique_ptr<client_detail::LocalChannel> local_;      // guarded by local_mu_
  std::chrono::steady_clock::time_point local_next_try_{};  // guarded by local_mu_
};

}  // namespace jitd
