// jitd's client library: the one public header of `jitd::client`.
//
// Everything that talks to a running jitd daemon goes through this header:
// `jitctl` uses it, and so can any C++ program that wants cubins or wants to
// administer the cache. Link it with CMake:
//
//   find_package(jitd REQUIRED)
//   target_link_libraries(app PRIVATE jitd::client)
//
// Typical use:
//
//   auto client = jitd::Client::Connect({});  // JITD_ENDPOINT or the default
//   if (!client.ok()) return client.status();
//   jitd::v1::GetKernelRequest request;
//   request.set_kernel("diffusion.modulate_scale_shift");
//   (*request.mutable_params())["dtype"] = "bf16";
//   absl::StatusOr<jitd::v1::GetKernelResponse> kernel = (*client)->GetKernel(request);
//
// Errors: every call returns absl::Status / absl::StatusOr. The code is the
// daemon's gRPC status code carried over unchanged (NOT_FOUND, INVALID_ARGUMENT,
// PERMISSION_DENIED, ...; see proto/jitd/v1/*.proto for what each RPC
// answers) and the message is the daemon's, meant for a person. When the
// daemon cannot be reached the code is UNAVAILABLE and the message names the
// endpoint. No call throws.
//
// Thread safety: a Client may be shared by any number of threads; each call
// is independent. The free functions are pure apart from reading the
// environment.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "jitd/v1/cache_admin.pb.h"
#include "jitd/v1/compiler.pb.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace jitd {

// ---------------------------------------------------------------------------
// Endpoints
//
// An endpoint is "unix:PATH" (a Unix socket; PATH may be relative) or
// "HOST:PORT" (TCP; "[::1]:7070" for IPv6 literals).

// Where a daemon started without --listen listens:
//   unix:$XDG_RUNTIME_DIR/jitd.sock        when XDG_RUNTIME_DIR is set,
//   unix:$XDG_CACHE_HOME/jitd/jitd.sock    else when XDG_CACHE_HOME is set,
//   unix:$HOME/.cache/jitd/jitd.sock       otherwise.
// It depends on the environment only (never on the daemon's --cache-dir), so
// that a client can compute it without asking anyone. The daemon calls this
// same function for its default, which is why it lives here.
std::string DefaultEndpoint();

// The endpoint a client should use: `explicit_endpoint` when non-empty, else
// $JITD_ENDPOINT when set and non-empty, else DefaultEndpoint().
std::string ResolveEndpoint(std::string_view explicit_endpoint);

// Whether `endpoint` is well-formed (see above); INVALID_ARGUMENT naming
// what is wrong otherwise. Nothing is resolved or connected.
absl::Status ValidateEndpoint(std::string_view endpoint);

// ---------------------------------------------------------------------------
// Sizes and durations, as jitd's command lines and config files spell them.

// "1048576", "512K", "512M", "10G", "1T", "1.5G", with an optional "B" or
// "iB" ("10GiB", "10GB"); case-insensitive. Suffixes are powers of 1024.
// INVALID_ARGUMENT for anything else, or a value past 2^64-1.
absl::StatusOr<uint64_t> ParseByteSize(std::string_view text);

// "90" (seconds), "30s", "15m", "2h", "7d". INVALID_ARGUMENT otherwise.
absl::StatusOr<std::chrono::seconds> ParseDuration(std::string_view text);

// ---------------------------------------------------------------------------
// The admin token

// The token in an admin token file: its content with surrounding whitespace
// (a trailing newline) removed. The daemon (--admin-token-file) and jitctl
// (--admin-token-file) both read it with this function, so they agree.
// NOT_FOUND when the file cannot be read, INVALID_ARGUMENT when it holds no
// token or whitespace inside one (which no Bearer header can carry).
absl::StatusOr<std::string> ReadAdminTokenFile(const std::filesystem::path& path);

// ---------------------------------------------------------------------------
// Spec files: the instantiations `jitctl warm --manifest FILE` and
// `jitd warm --manifest FILE` warm.
//
//   # One table per instantiation; fields as in jitd.v1.KernelSpec.
//   [[spec]]
//   kernel = "diffusion.modulate_scale_shift"
//   params = { dtype = "bf16" }
//   arch = "sm_90"              # optional: default is --arch, then the daemon's
//   options = ["-lineinfo"]     # optional

// The specs of the file at `path`, in file order. INVALID_ARGUMENT naming
// the file, line and key for a syntax error, an unknown key or a value of
// the wrong type; NOT_FOUND when the file cannot be read.
absl::StatusOr<std::vector<v1::KernelSpec>> LoadSpecFile(const std::filesystem::path& path);

// ---------------------------------------------------------------------------
// The client

struct ClientOptions {
  // Empty = ResolveEndpoint(""): $JITD_ENDPOINT, then DefaultEndpoint().
  std::string endpoint;
  // Connect() waits at most this long for the daemon to accept the
  // connection, and fails at once when the connection is refused, so a
  // missing daemon is an error in well under a second, never a hang.
  // Zero skips the check: the first call connects (and fails fast) instead.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(3)};
  // Deadline of each unary call. A GetKernel that has to compile can take
  // tens of seconds, hence the generous default.
  std::chrono::milliseconds call_timeout{std::chrono::seconds(120)};
  // Deadline of a whole Warm() stream; zero = none (a full warm-up of every
  // kernel can take hours).
  std::chrono::milliseconds warm_timeout{0};
  // Sent as "authorization: Bearer <admin_token>" with every call when
  // non-empty. A daemon started with --admin-token-file requires it for
  // Evict and Verify(repair) and answers PERMISSION_DENIED without it.
  std::string admin_token;
};

class Client {
 public:
  // Creates a client for options.endpoint (resolved as ResolveEndpoint
  // does) and, unless options.connect_timeout is zero, checks that a daemon
  // accepts connections there. INVALID_ARGUMENT for a malformed endpoint,
  // UNAVAILABLE naming the endpoint when nobody answers.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(ClientOptions options);

  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The endpoint this client talks to, resolved ("unix:/run/user/1000/jitd.sock").
  const std::string& endpoint() const;

  // --- Health ---------------------------------------------------------------
  // Whether the daemon answers grpc.health.v1.Health/Check with SERVING.
  // OK(true) means ready for calls; an error means it could not be asked.
  absl::StatusOr<bool> IsServing();

  // Polls IsServing() until it says SERVING or `timeout` passes; each poll
  // waits for the daemon's socket to accept, so this covers a daemon that is
  // still starting. DEADLINE_EXCEEDED (naming the endpoint) on timeout.
  absl::Status WaitUntilServing(std::chrono::milliseconds timeout);

  // --- Compiler service -------------------------------------------------------
  // One kernel instantiation as a cubin; see GetKernelRequest for the modes.
  absl::StatusOr<v1::GetKernelResponse> GetKernel(const v1::GetKernelRequest& request);

  // The kernels the daemon's manifest registers.
  absl::StatusOr<v1::ListKernelsResponse> ListKernels(const v1::ListKernelsRequest& request);

  // Compiles many instantiations into the daemon's cache. `on_progress` (may
  // be empty) runs on the calling thread once per finished instantiation, in
  // order. Returns the last progress message (its counts are the totals), or
  // the stream's error. A failed instantiation is reported in the progress,
  // not as an error of the call.
  absl::StatusOr<v1::WarmProgress> Warm(const v1::WarmRequest& request,
                                        const std::function<void(const v1::WarmProgress&)>& on_progress);

  // --- CacheAdmin service -----------------------------------------------------
  absl::StatusOr<v1::StatsResponse> Stats();
  absl::StatusOr<v1::ListEntriesResponse> ListEntries(const v1::ListEntriesRequest& request);
  // Needs the admin token when the daemon has one.
  absl::StatusOr<v1::EvictResponse> Evict(const v1::EvictRequest& request);
  // Needs the admin token with repair, when the daemon has one.
  absl::StatusOr<v1::VerifyResponse> Verify(const v1::VerifyRequest& request);

  class Impl;

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace jitd
