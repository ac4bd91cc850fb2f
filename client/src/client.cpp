// jitd::Client: typed calls over one gRPC channel to the daemon (the kernel
// calls built on them are in client_kernels.cpp).
#include "jitd/client.h"

#include <grp.h>
#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>

#include "jitd/base/files.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "src/client_impl.h"
#include "src/grpc_status.h"
#include "src/health_check.h"

namespace jitd {

using text::Cat;
namespace {

using Clock = std::chrono::system_clock;

std::string EnvOrEmpty(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

// The daemon is local (or on the same network), so a refused connection is
// retried after 100 ms rather than gRPC's default of one second: this is
// what lets WaitUntilServing() notice a freshly started daemon quickly.
// Only the pause between attempts: gRPC reads GRPC_ARG_MIN_RECONNECT_BACKOFF_MS
// as the least time one attempt gets to connect and receive the daemon's
// HTTP/2 SETTINGS (default 20 s). Set to 100 ms, a daemon slow to answer
// a connection on a loaded machine failed a fresh client's first call
// UNAVAILABLE ("timed out before receiving SETTINGS frame").
constexpr int kReconnectBackoffMs = 100;
constexpr int kMaxReconnectBackoffMs = 1000;
// How long one health poll may wait for the socket before polling again.
constexpr std::chrono::milliseconds kHealthPollTimeout{500};
// Pause between polls while the daemon answers NOT_SERVING (it is starting
// or draining); short, as readiness follows within milliseconds.
constexpr std::chrono::milliseconds kNotServingPause{20};
// The local path: a daemon answers its preface and a cache lookup in well
// under a millisecond; one that takes longer than these is asked over gRPC
// (which then waits as long as the call's own deadline allows).
constexpr std::chrono::milliseconds kLocalOpenTimeout{500};
constexpr std::chrono::milliseconds kLocalAskTimeout{500};

// As long as a connect may take, and never long: a daemon that does not
// answer the preface at once is asked over gRPC instead.
std::chrono::milliseconds LocalOpenTimeout(const ClientOptions& options) {
  return options.connect_timeout.count() > 0 ? std::min(options.connect_timeout, kLocalOpenTimeout) : kLocalOpenTimeout;
}

// TLS for a TCP endpoint when any TLS file is set; plaintext otherwise.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(const ClientOptions& options) {
  const bool tls = !options.tls_ca_file.empty() || !options.tls_cert_file.empty() || !options.tls_key_file.empty();
  // Insecure credentials start gRPC's runtime (its threads, ~0.5 ms): made
  // with the channel instead, which the local path may never need.
  if (options.endpoint.starts_with("unix:") || !tls) return nullptr;
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError("a client certificate and its key go together: set both or neither");
  }
  grpc::SslCredentialsOptions ssl;
  for (auto [path, field, what] : {std::tuple{&options.tls_ca_file, &ssl.pem_root_certs, "TLS CA"},
                                   std::tuple{&options.tls_cert_file, &ssl.pem_cert_chain, "TLS certificate"},
                                   std::tuple{&options.tls_key_file, &ssl.pem_private_key, "TLS key"}}) {
    if (path->empty()) continue;
    JITD_ASSIGN_OR_RETURN(std::string pem, files::ReadPemFile(*path, what));
    *field = std::move(pem);
  }
  return grpc::SslCredentials(ssl);
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& endpoint,
                                           const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kReconnectBackoffMs);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kMaxReconnectBackoffMs);
  // Cubins of large kernels pass gRPC's default 4 MiB receive limit.
  args.SetMaxReceiveMessageSize(-1);
  return grpc::CreateCustomChannel(endpoint, credentials, args);
}

std::string Octal(unsigned value) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "%o", value);
  return buffer;
}

// A missing socket file is the common "daemon not started" case; saying so
// beats gRPC's generic connect failure.
absl::Status CheckUnixSocketExists(const std::string& endpoint) {
  if (!endpoint.starts_with("unix:")) return absl::OkStatus();
  const std::string path = endpoint.substr(5);
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) {
    if (errno == EACCES) {
      return absl::PermissionDeniedError(Cat("cannot reach jitd at ", endpoint, ": permission denied: this user (uid ",
                                             ::getuid(), ") may not enter the socket's directory ",
                                             std::filesystem::path(path).parent_path().string(),
                                             "; ask the operator for a directory the socket's group may enter"));
    }
    return absl::UnavailableError(Cat("cannot reach jitd at ", endpoint, ": ", std::strerror(errno),
                                      " (is the daemon running? start it with `jitd`)"));
  }
  // Connecting needs write permission on the socket file; without it gRPC
  // only says the connection failed.
  if (::access(path.c_str(), R_OK | W_OK) != 0 && errno == EACCES) {
    const struct group* group = ::getgrgid(info.st_gid);
    const std::string group_name = group != nullptr ? group->gr_name : Cat("gid ", info.st_gid);
    return absl::PermissionDeniedError(
        Cat("cannot reach jitd at ", endpoint, ": permission denied: the socket is mode 0", Octal(info.st_mode & 0777),
            " for its owner (uid ", info.st_uid, ") and group ", group_name, ", and this user (uid ", ::getuid(),
            ") is not in group ", group_name, "; ask the operator to add it (usermod -aG ", group_name,
            " USER, then log in again) or to start jitd with --socket-group GROUP"));
  }
  return absl::OkStatus();
}

// A connection the daemon closed at once with a GOAWAY saying `why`.
absl::Status Refused(const std::string& endpoint, const std::string& why) {
  return absl::UnavailableError(Cat("cannot reach jitd at ", endpoint, ": the daemon refused the connection: ", why));
}

}  // namespace

Client::Impl::Impl(ClientOptions options, std::shared_ptr<grpc::ChannelCredentials> credentials)
    : options_(std::move(options)), credentials_(std::move(credentials)) {
  if (!options_.fallback_cache_dir.empty()) fallback_ = options_.open_fallback(options_.fallback_cache_dir);
}

const std::shared_ptr<grpc::Channel>& Client::Impl::channel() {
  std::call_once(channel_once_, [this] {
    channel_ =
        MakeChannel(options_.endpoint, credentials_ != nullptr ? credentials_ : grpc::InsecureChannelCredentials());
    admin_ = v1::CacheAdmin::NewStub(channel_);
    compiler_ = v1::Compiler::NewStub(channel_);
  });
  return channel_;
}

v1::Compiler::Stub& Client::Impl::compiler() {
  channel();
  return *compiler_;
}

v1::CacheAdmin::Stub& Client::Impl::admin() {
  channel();
  return *admin_;
}

absl::Status Client::Impl::AwaitLocal(absl::StatusOr<std::unique_ptr<client_detail::LocalChannel>> opened,
                                      std::chrono::steady_clock::time_point deadline, std::string* refusal) {
  std::lock_guard lock(local_mu_);
  absl::Status status = opened.status();
  if (opened.ok()) {
    status = (*opened)->AwaitPreface(deadline);
    *refusal = (*opened)->refusal();
  }
  if (!status.ok()) {
    local_next_try_ = std::chrono::steady_clock::now() + kLocalRetry;
    return status;
  }
  local_ = *std::move(opened);
  return absl::OkStatus();
}

absl::Status Client::Impl::OpenLocalLocked(std::chrono::steady_clock::time_point now) {
  absl::StatusOr<std::unique_ptr<client_detail::LocalChannel>> opened =
      client_detail::LocalChannel::Open(options_.endpoint.substr(5), LocalOpenTimeout(options_));
  if (!opened.ok()) {
    local_next_try_ = now + kLocalRetry;
    return opened.status();
  }
  local_ = *std::move(opened);
  return absl::OkStatus();
}

absl::StatusOr<v1::LocalAnswer> Client::Impl::AskLocal(const v1::GetKernelRequest& request, bool* refused) {
  *refused = false;
  std::lock_guard lock(local_mu_);
  if (local_ == nullptr) {
    const auto now = std::chrono::steady_clock::now();
    if (now < local_next_try_) return absl::UnavailableError("the local path failed moments ago");
    JITD_RETURN_IF_ERROR(OpenLocalLocked(now));
  }
  absl::StatusOr<v1::LocalAnswer> answer = local_->Ask(request, std::min(options_.call_timeout, kLocalAskTimeout));
  if (!answer.ok()) {
    if (!local_->refusal().empty()) {
      *refused = true;
      answer = Refused(endpoint(), local_->refusal());
    }
    local_.reset();  // broken: the next request opens a new one
  }
  return answer;
}

absl::Status Client::Impl::AwaitConnected() {
  const auto deadline = Clock::now() + options_.connect_timeout;
  channel();
  grpc_connectivity_state state = channel_->GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) {
      if (const std::string why = client_detail::RefusalReason(endpoint()); !why.empty()) {
        return absl::UnavailableError(Cat("cannot reach jitd at ", endpoint(), ": ", why));
      }
      return absl::UnavailableError(Cat("cannot reach jitd at ", endpoint(),
                                        ": connection refused (is the daemon running? start it with `jitd`)"));
    }
    if (!channel_->WaitForStateChange(state, deadline)) {
      return absl::UnavailableError(
          Cat("cannot reach jitd at ", endpoint(), ": no connection within ", options_.connect_timeout.count(), " ms"));
    }
    state = channel_->GetState(/*try_to_connect=*/true);
  }
  return absl::OkStatus();
}

void Client::Impl::Prepare(grpc::ClientContext* context, std::chrono::milliseconds timeout, Call call) const {
  if (timeout.count() > 0) context->set_deadline(Clock::now() + timeout);
  // The token goes only where it is needed: a server that answers Stats
  // or GetKernel learns nothing it could replay.
  if (call == Call::kAdmin && !options_.admin_token.empty()) {
    context->AddMetadata("authorization", Cat("Bearer ", options_.admin_token));
  }
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  options.endpoint = ResolveEndpoint(options.endpoint);
  JITD_RETURN_IF_ERROR(ValidateEndpoint(options.endpoint));
  const bool fallback_from_env = options.fallback_cache_dir.empty();
  if (fallback_from_env) options.fallback_cache_dir = EnvOrEmpty("JITD_FALLBACK_CACHE_DIR");
  if (!options.fallback_cache_dir.empty() && !options.open_fallback) {
    return absl::FailedPreconditionError(
        Cat("a fallback cache directory is set (", options.fallback_cache_dir.string(),
            fallback_from_env ? ", from JITD_FALLBACK_CACHE_DIR" : ", ClientOptions::fallback_cache_dir",
            ") but this program cannot read one: link jitd::client_fallback and set "
            "ClientOptions::open_fallback = jitd::OpenFallbackCache (jitd/client_fallback.h), or unset it"));
  }
  if (!options.prefer_path.has_value()) options.prefer_path = options.endpoint.starts_with("unix:");
  if (!options.endpoint.starts_with("unix:")) options.local_path = false;
  if (!options.local_path.has_value()) options.local_path = true;
  // The local path's connection first: the daemon answers its preface
  // while the rest of Connect (the token, the client itself) is done, so
  // that its round trip costs Connect little. The socket's checks, which
  // only explain a failure, wait for one.
  const bool check_reachable = options.connect_timeout.count() > 0;
  const auto local_deadline = std::chrono::steady_clock::now() + LocalOpenTimeout(options);
  std::optional<absl::StatusOr<std::unique_ptr<client_detail::LocalChannel>>> local;
  if (check_reachable && *options.local_path) {
    local = client_detail::LocalChannel::Open(options.endpoint.substr(5), LocalOpenTimeout(options));
  }
  absl::StatusOr<std::string> token = std::string();
  if (options.admin_token.empty() && options.read_socket_admin_token && options.endpoint.starts_with("unix:")) {
    // The daemon's own token, when this user may read it; otherwise admin
    // calls get PERMISSION_DENIED, as they should.
    token = ReadSocketAdminToken(options.endpoint.substr(5));
    if (token.ok()) options.admin_token = *std::move(token);
  }
  JITD_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials, ChannelCredentialsFor(options));
  auto impl = std::make_unique<Impl>(options, std::move(credentials));
  impl->socket_token_unread_ = token.status();
  if (check_reachable) {
    // The local path's preface proves a daemon is there (one round trip,
    // where gRPC's connect costs a channel); a refusal says why at once;
    // anything else (no socket, an older daemon) is left to the socket's
    // checks and gRPC's connect.
    absl::Status reachable;
    std::string refusal;
    const bool local_open = local.has_value() && impl->AwaitLocal(*std::move(local), local_deadline, &refusal).ok();
    if (!refusal.empty()) {
      reachable = Refused(options.endpoint, refusal);
    } else if (!local_open) {
      reachable = CheckUnixSocketExists(options.endpoint);
      if (reachable.ok()) reachable = impl->AwaitConnected();
    }
    // With a fallback, an absent daemon is what the client is built for:
    // kernels come from the fallback until the daemon answers again.
    if (!reachable.ok() && !(absl::IsUnavailable(reachable) && impl->fallback_ != nullptr)) return reachable;
  }
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

const std::string& Client::endpoint() const { return impl_->endpoint(); }

const absl::Status& Client::socket_token_status() const { return impl_->socket_token_unread_; }

absl::StatusOr<bool> Client::IsServing() {
  return client_detail::CheckServing(impl_->channel(), endpoint(), impl_->options_.call_timeout,
                                     /*wait_for_ready=*/false);
}

absl::Status Client::WaitUntilServing(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  absl::Status last = absl::UnavailableError("not asked yet");
  while (Clock::now() < deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    absl::StatusOr<bool> serving = client_detail::CheckServing(
        impl_->channel(), endpoint(), std::min(left, kHealthPollTimeout), /*wait_for_ready=*/true);
    if (serving.ok() && *serving) return absl::OkStatus();
    if (serving.ok()) {
      last = absl::UnavailableError("the daemon answers NOT_SERVING");
      std::this_thread::sleep_for(kNotServingPause);
    } else {
      last = serving.status();
    }
  }
  return absl::DeadlineExceededError(
      Cat("jitd at ", endpoint(), " was not serving within ", timeout.count(), " ms; last: ", last.message()));
}

absl::StatusOr<v1::GetKernelResponse> Client::GetKernel(const v1::GetKernelRequest& request) {
  impl_->get_kernel_rpcs_.fetch_add(1, std::memory_order_relaxed);
  return impl_->Unary<v1::GetKernelResponse>(
      [&](auto* context, auto* response) { return impl_->compiler().GetKernel(context, request, response); });
}

absl::StatusOr<v1::ListKernelsResponse> Client::ListKernels(const v1::ListKernelsRequest& request) {
  const auto page = [this](const v1::ListKernelsRequest& asked) {
    return impl_->Unary<v1::ListKernelsResponse>(
        [&](auto* context, auto* response) { return impl_->compiler().ListKernels(context, asked, response); });
  };
  if (request.page_size() != 0 || !request.page_token().empty()) return page(request);
  JITD_ASSIGN_OR_RETURN(v1::ListKernelsResponse all, page(request));
  // Every page, in order. A daemon's pages end; this many would be
  // millions of kernels, so more means a daemon that never ends them.
  constexpr int kMaxPages = 1024;
  v1::ListKernelsRequest next = request;
  for (int pages = 1; !all.next_page_token().empty(); ++pages) {
    if (pages == kMaxPages) {
      return absl::InternalError(text::Cat("jitd at ", endpoint(), " answered ", pages,
                                           " pages of kernels without a last one; list them with page_size set"));
    }
    next.set_page_token(all.next_page_token());
    JITD_ASSIGN_OR_RETURN(v1::ListKernelsResponse more, page(next));
    for (v1::KernelInfo& kernel : *more.mutable_kernels()) *all.add_kernels() = std::move(kernel);
    all.set_next_page_token(more.next_page_token());
  }
  return all;
}

absl::StatusOr<v1::WarmProgress> Client::Warm(const v1::WarmRequest& request,
                                              const std::function<void(const v1::WarmProgress&)>& on_progress) {
  grpc::ClientContext context;
  impl_->Prepare(&context, impl_->options_.warm_timeout);
  std::unique_ptr<grpc::ClientReader<v1::WarmProgress>> reader = impl_->compiler().Warm(&context, request);
  v1::WarmProgress progress;
  v1::WarmProgress last;
  while (reader->Read(&progress)) {
    if (on_progress) on_progress(progress);
    last = progress;
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) return client_detail::FromGrpcCall(status, endpoint());
  return last;
}

absl::StatusOr<v1::StatsResponse> Client::Stats() {
  return impl_->Unary<v1::StatsResponse>(
      [&](auto* context, auto* response) { return impl_->admin().Stats(context, v1::StatsRequest(), response); });
}

absl::StatusOr<v1::ListEntriesResponse> Client::ListEntries(const v1::ListEntriesRequest& request) {
  return impl_->Unary<v1::ListEntriesResponse>(
      [&](auto* context, auto* response) { return impl_->admin().ListEntries(context, request, response); });
}

absl::StatusOr<v1::EvictResponse> Client::Evict(const v1::EvictRequest& request) {
  return impl_->Unary<v1::EvictResponse>(
      [&](auto* context, auto* response) { return impl_->admin().Evict(context, request, response); },
      Impl::Call::kAdmin);
}

absl::StatusOr<v1::VerifyResponse> Client::Verify(const v1::VerifyRequest& request) {
  return impl_->Unary<v1::VerifyResponse>(
      [&](auto* context, auto* response) { return impl_->admin().Verify(context, request, response); },
      Impl::Call::kAdmin);
}

}  // namespace jitd
