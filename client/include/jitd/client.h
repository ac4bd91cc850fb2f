// jitd's client library: the manual of `jitd::client`. Its CUDA half (Module,
// the driver opened at run time) is jitd/cuda_module.h, included here.
//
// Everything that talks to a running jitd daemon goes through this header:
// `jitctl` uses it, and so can any C++ program that wants CUDA kernels or
// wants to administer the cache. Link it with CMake:
//
//   find_package(jitd REQUIRED)
//   target_link_libraries(app PRIVATE jitd::client)
//
// Typical use, in a process with a current CUDA context (C++20 designated
// initializers; with C++17, fill a KernelSpec field by field):
//
//   auto client = jitd::Client::Connect({});  // JITD_ENDPOINT or the default
//   if (!client.ok()) return client.status();
//   auto module = (*client)->GetKernel({.kernel = "diffusion.modulate_scale_shift",
//                                       .params = {{"dtype", "bf16"}}});
//   if (!module.ok()) return module.status();
//   auto fn = (*module)->GetFunction(
//       "sglang::modulate_scale_shift::modulate_scale_shift_kernel<__nv_bfloat16>");
//   // cuLaunchKernel(fn->handle, ...)
//
// GetKernel() asks the daemon once per instantiation for the life of the
// Client (a memo answers later requests; keep one Client per process), loads the cubin with the CUDA driver (opened at
// run time, see jitd/cuda_module.h) and caches the loaded module per CUDA
// context. GetKernelBinary() is the same request without the driver: the
// cubin, its symbol table and its content key. With
// ClientOptions::fallback_cache_dir (and the optional jitd::client_fallback
// component, jitd/client_fallback.h), a daemon that cannot be reached (being
// restarted, say) is replaced by a read-only look into a warmed cache
// directory, so that a restart never becomes a first-use compile failure.
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
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "jitd/base/admin_token.h"
#include "jitd/base/endpoint.h"
#include "jitd/base/kernel_params.h"
#include "jitd/base/units.h"
#include "jitd/cuda_module.h"
#include "jitd/spec_file.h"
#include "jitd/v1/cache_admin.pb.h"
#include "jitd/v1/compiler.pb.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace jitd {

// ---------------------------------------------------------------------------
// Kernel instantiations

// One kernel instantiation, as GetKernel() and GetKernelBinary() take it.
// Every field has an initializer, so designated initializers may name only
// some ({.kernel = "norm.rms", .params = {{"dtype", "bf16"}}}).
struct KernelSpec {
  // Manifest name, "diffusion.modulate_scale_shift".
  std::string kernel{};
  // Template parameters by name, {{"dtype", "bf16"}}. Name every one,
  // defaults included, for the fallback cache to find the entry (the cache
  // stores an instantiation under all of its params).
  std::map<std::string, std::string> params{};
  // "sm_90", "sm_90a", "sm_100a", ... Empty: the current CUDA device's
  // ("sm_XY" from its compute capability; see CurrentDeviceArch()) when the
  // driver is present, else the daemon's default.
  std::string arch{};
  // Extra NVRTC options from the daemon's allow-list ("-lineinfo").
  std::vector<std::string> options{};
  // Several archs in one image: the answer is a fatbin holding a cubin for
  // each sm_ arch and the PTX of each compute_ arch listed (arch must then
  // be empty). GetKernel() loads it as it loads a cubin: the driver picks
  // the SASS for the GPU, else JIT-compiles the PTX.
  std::vector<std::string> archs{};
  // The daemon's fleet set (its --fleet-archs): a fatbin of each fleet arch
  // plus the PTX of the lowest. Not with arch or archs.
  bool fleet = false;
};

// The identity of a spec, as the memo keys it: kernel, params (sorted), arch
// and options (sorted, duplicates dropped, as the daemon treats them), in
// the form "kernel{k=v,k=v}@arch[opt,opt]" ("[...]" only with options;
// "@%a,b" for archs, "@%%fleet" for the fleet set).
// Specs the daemon answers alike map to one string and any two others to
// different strings: the characters the form uses as punctuation
// ("%,=@[]{}") are written as %XX inside names and values.
std::string CanonicalSpec(const KernelSpec& spec);

// A kernel instantiation's cubin and what is needed to use it.
struct KernelBinary {
  // Hex content key (the cache's identity of this cubin).
  std::string key;
  // The cubin (ELF) bytes; empty only for a PREFETCH miss (source NONE).
  std::string cubin;
  // Every entry point: name expression -> lowered (mangled) name.
  std::vector<KernelSymbol> symbols;
  // The architecture it was compiled for ("sm_80+sm_100+compute_80" for
  // a fatbin).
  std::string arch;
  // For a fatbin (KernelSpec::archs or fleet): what it holds, in order;
  // `cubin` is then the fatbin.
  std::vector<std::string> fatbin_archs;
  // MEMORY, DISK, BUNDLE, REMOTE or COMPILED as the daemon answered; FALLBACK when
  // read from ClientOptions::fallback_cache_dir; NONE for a PREFETCH miss.
  v1::GetKernelResponse::Source source = v1::GetKernelResponse::SOURCE_UNSPECIFIED;
  // Wall time of the NVRTC compile that produced it, and NVRTC's log.
  double compile_ms = 0;
  std::string log;
  std::string nvrtc_version;
  // The blob file the cubin was read and verified from (path delivery or
  // the fallback); empty when the bytes came in the response.
  std::string blob_path;

  // The symbol for a name expression, or nullptr.
  const KernelSymbol* FindSymbol(std::string_view name_expression) const;
};

// A module kernel (`kind = "module"`): its tvm-ffi shared object in a file
// this process may load (dlopen, tvm::ffi::Module::LoadFromFile), and its
// exports.
struct ModuleFile {
  std::filesystem::path path;  // DIR/<key>.so, mode 0500
  std::string key;
  // Export names, as the unit declares them (each is the function
  // __tvm_ffi_<name> of the object).
  std::vector<std::string> exports;
  // What built it: "nvcc V13.0.88; tvm-ffi 0.1.15.post2; toolchain <fp>"
  // (load it only with that tvm-ffi).
  std::string builder;
};

// Where kernels come from while the daemon cannot be reached: the read-only
// fallback cache of jitd::client_fallback (jitd/client_fallback.h), or a
// program's own. Find() is called from any thread.
class KernelFallback {
 public:
  virtual ~KernelFallback() = default;
  // The binary for `spec` (source FALLBACK), or why there is none: NOT_FOUND
  // (nothing for it, or only entries that fail verification), or
  // FAILED_PRECONDITION (nothing readable there, or a spec it cannot answer).
  // The client adds the daemon's UNAVAILABLE message in front.
  virtual absl::StatusOr<KernelBinary> Find(const KernelSpec& spec) = 0;
};

// Makes the fallback of a directory (ClientOptions::open_fallback).
using FallbackOpener = std::function<std::unique_ptr<KernelFallback>(const std::filesystem::path& dir)>;

// What a Client has done so far, for tests and metrics. Monotonic.
struct ClientCounters {
  // GetKernel requests the daemon answered for this client: RPCs sent (by
  // any method, raw GetKernel(request) included) and local-path answers
  // used (a local-path miss, asked again as an RPC, counts once).
  uint64_t get_kernel_rpcs = 0;
  // Of those, the answers that came over the local path.
  uint64_t local_answers = 0;
  // GetKernelBinary() answers served by the memo without an RPC.
  uint64_t memo_hits = 0;
  // Answers read from the fallback cache directory.
  uint64_t fallback_answers = 0;
  // cuModuleLoadData calls made by GetKernel().
  uint64_t module_loads = 0;
};

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
  // non-empty. The daemon requires it for Evict and Verify(repair) and
  // answers PERMISSION_DENIED without it: --admin-token-file's token, or,
  // without that flag, the token the daemon made at start and wrote beside
  // its socket (SOCKET.admin-token, readable by the daemon's user only).
  // Empty here and a unix: endpoint: Connect() reads SOCKET.admin-token
  // when this process can (read_socket_admin_token), so the daemon's own
  // user is admin without configuring anything, and other users are not.
  std::string admin_token;
  bool read_socket_admin_token = true;
  // TLS for a HOST:PORT endpoint (PEM files): the CA that signed the
  // daemon's certificate (empty: the system's roots), and this client's
  // certificate chain and key for a daemon that requires them
  // (--tls-client-ca). Any of them set: the channel is TLS; none: plaintext,
  // which a daemon only accepts when started with --insecure-tcp. Ignored
  // for unix: endpoints.
  std::filesystem::path tls_ca_file;
  std::filesystem::path tls_cert_file;
  std::filesystem::path tls_key_file;
  // A warmed cache directory (`jitd warm --cache-dir DIR`, or the daemon's
  // own --cache-dir) that GetKernelBinary() and GetKernel() read, read-only,
  // when the daemon cannot be reached (UNAVAILABLE). Empty: the
  // JITD_FALLBACK_CACHE_DIR environment variable, when set; else none.
  //
  // The rule: the answer is the cache entry for exactly (kernel, params,
  // arch), newest first, for a request without extra options. Among the
  // entries of that instantiation, the ones compiled with the fewest NVRTC
  // options are taken (a request's extra options only ever add to the
  // manifest's, so these are the ones without), and of those the most
  // recently created whose checksum verifies; a corrupt blob is skipped,
  // never served. Requests with options are not answered from it. With an
  // empty arch (no CUDA driver here) the entries must all be for one arch.
  // Fallback answers say so (source FALLBACK) and are not memoized: the
  // next request asks the daemon again. With a fallback directory set,
  // Connect() succeeds even when the daemon does not answer.
  //
  // Reading a cache directory takes SQLite, which jitd::client does not
  // link: set open_fallback too (jitd::OpenFallbackCache, from the optional
  // jitd::client_fallback component). A directory, given here or in the
  // environment, without an opener makes Connect() fail with
  // FAILED_PRECONDITION saying so.
  std::filesystem::path fallback_cache_dir;
  // Opens fallback_cache_dir's fallback; unset, none can be read.
  FallbackOpener open_fallback;
  // Ask the daemon for the blob file's path instead of the cubin's bytes
  // (GetKernelRequest.delivery = PATH), then read the file and verify its
  // checksum here: a same-host client saves the copy through the socket
  // (a 1 MiB cubin costs about 1 ms through gRPC here, its memcpy 39 us). A file that fails its
  // checksum is DATA_LOSS, never a served cubin; a file that cannot be read
  // (evicted meanwhile, another user's directory) is asked for again as
  // bytes. Unset: true for unix: endpoints, false for TCP.
  std::optional<bool> prefer_path;
  // Ask a unix: daemon for cached kernels over the local path first (jitd's
  // own framing on the same socket, without gRPC; docs/CONTRACT.md): a
  // first request then costs a fraction of a millisecond instead of the
  // ~2 ms a gRPC channel takes to set up. Misses, compiles and every other
  // call go over gRPC, whose channel is made only when first needed; a
  // daemon that does not speak the local path is asked over gRPC. Unset:
  // true for unix: endpoints; always false for TCP.
  std::optional<bool> local_path;
};

class Client {
 public:
  // Creates a client for options.endpoint (resolved as ResolveEndpoint
  // does) and, unless options.connect_timeout is zero, checks that a daemon
  // accepts connections there. INVALID_ARGUMENT for a malformed endpoint,
  // UNAVAILABLE naming the endpoint when nobody answers (unless a fallback
  // cache directory is set: then the client is returned, its calls try the
  // daemon again, and kernels come from the fallback meanwhile).
  static absl::StatusOr<std::unique_ptr<Client>> Connect(ClientOptions options);

  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The endpoint this client talks to, resolved ("unix:/run/user/1000/jitd.sock").
  // Why Connect() could not read the daemon's admin token beside its
  // socket (ClientOptions::read_socket_admin_token): OK when it read it,
  // or did not try (a token was given, or the endpoint is not unix:).
  const absl::Status& socket_token_status() const;
  const std::string& endpoint() const;

  // --- Health ---------------------------------------------------------------
  // Whether the daemon answers grpc.health.v1.Health/Check with SERVING.
  // OK(true) means ready for calls; an error means it could not be asked.
  absl::StatusOr<bool> IsServing();

  // Polls IsServing() until it says SERVING or `timeout` passes; each poll
  // waits for the daemon's socket to accept, so this covers a daemon that is
  // still starting. DEADLINE_EXCEEDED (naming the endpoint) on timeout.
  absl::Status WaitUntilServing(std::chrono::milliseconds timeout);

  // --- Kernels ------------------------------------------------------------------
  // The cubin of one instantiation. The first request for a spec (by
  // CanonicalSpec, after the arch default is applied) asks the daemon; later
  // ones, from any thread, get the same answer from this client's memo
  // without an RPC, and concurrent first requests share one RPC. Errors are
  // not memoized. With a fallback directory, an unreachable daemon is
  // answered from it (see ClientOptions::fallback_cache_dir); when that has
  // no entry either, the error stays UNAVAILABLE and says what the fallback
  // found. `mode` is GetKernelRequest's: CACHED_ONLY answers NOT_FOUND
  // instead of compiling; PREFETCH may answer source NONE without a cubin
  // (such answers are not memoized).
  absl::StatusOr<std::shared_ptr<const KernelBinary>> GetKernelBinary(
      const KernelSpec& spec, v1::GetKernelRequest::Mode mode = v1::GetKernelRequest::COMPILE);

  // GetKernelBinary(spec), loaded into the calling thread's current CUDA
  // context (see Module::Load). Loaded modules are memoized per context:
  // the same spec in the same context returns the same Module. Without a
  // CUDA driver: FAILED_PRECONDITION naming libcuda.so.1 and the loader's
  // reason, before any RPC.
  absl::StatusOr<std::shared_ptr<const Module>> GetKernel(const KernelSpec& spec);

  // A module kernel's shared object, written to a file and verified before
  // it is handed out: GetKernelBinary(spec), then, in `dir` (default
  // $XDG_RUNTIME_DIR/jitd-modules, else TMPDIR-or-/tmp/jitd-modules-<uid>;
  // made 0700; refused with FAILED_PRECONDITION when it is a link, another
  // user's, or writable by its group or others), a new file of mode 0500
  // (O_EXCL, O_NOFOLLOW) renamed to <key>.so, read back and held to the
  // checksum of the bytes received (DATA_LOSS when they differ). A module
  // is code this process will run: it is never taken from a place someone
  // else can write. INVALID_ARGUMENT when the kernel is not a module (a
  // cubin, PTX or fatbin: use GetKernel).
  absl::StatusOr<ModuleFile> GetModuleFile(const KernelSpec& spec, const std::filesystem::path& dir = {});

  ClientCounters counters() const;

  // --- Compiler service -------------------------------------------------------
  // The GetKernel RPC as it is: no memo, no arch default, no path handling,
  // no fallback. See GetKernelRequest for the modes.
  absl::StatusOr<v1::GetKernelResponse> GetKernel(const v1::GetKernelRequest& request);

  // The kernels the daemon's manifest registers. Without page_size and
  // page_token, every page (the daemon answers at most 4096 kernels at a
  // time), in one response without a next_page_token; a request that
  // names either gets that one page as the daemon answers it. ABORTED when
  // the daemon reloaded its kernels between two pages (ask again).
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
