// The daemon's settings: where they come from and what they default to.
//
// Three layers, later ones winning: built-in defaults, the TOML config file
// (--config FILE; see config_file.h), then command-line flags. Each source
// is read into a ConfigLayer that holds only what it sets, and each value is
// checked where it is read, so an error names the flag or file:line:key.
// How each setting is spelled, read, merged and defaulted is one row of
// settings.h, the table the flags, the file and ResolveConfig are made from.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "manifest/manifest.h"

namespace jitd::daemon {

// A kernel tree to serve: `--kernels DIR` (unnamed: bare kernel names and
// the keys they always had) or `--kernels NAME=DIR` (kernels "NAME/kernel").
using KernelTreeSource = manifest::TreeSource;

// What one source sets; unset fields fall through to the layer below.
struct ConfigLayer {
  std::optional<std::vector<std::string>> listen;
  std::optional<std::filesystem::path> cache_dir;
  std::optional<std::vector<KernelTreeSource>> kernels;
  std::optional<std::vector<std::filesystem::path>> locks;
  std::optional<std::filesystem::path> cuda_include;
  std::optional<std::filesystem::path> nvcc;
  std::optional<std::filesystem::path> host_cxx;
  std::optional<std::filesystem::path> tvm_ffi_root;
  std::optional<uint64_t> max_cache_bytes;
  std::optional<uint32_t> workers;
  std::optional<std::string> arch;
  std::optional<std::vector<std::string>> fleet_archs;
  std::optional<std::string> remote;
  std::optional<std::filesystem::path> remote_password_file;
  std::optional<std::filesystem::path> remote_tls_ca;
  std::optional<std::filesystem::path> remote_tls_cert;
  std::optional<std::filesystem::path> remote_tls_key;
  std::optional<std::chrono::milliseconds> remote_timeout;
  std::optional<uint64_t> remote_max_value_bytes;
  std::optional<std::filesystem::path> remote_signing_key_file;
  std::optional<std::vector<std::filesystem::path>> bundles;
  std::optional<std::string> metrics_listen;
  std::optional<std::filesystem::path> admin_token_file;
  std::optional<uint64_t> max_queue;
  std::optional<uint64_t> hot_cache_bytes;
  std::optional<std::chrono::seconds> negative_ttl;
  std::optional<uint64_t> rewarm_count;
  std::optional<std::chrono::seconds> rewarm_seconds;
  std::optional<bool> log_hits;
  std::optional<bool> local_path;
  std::optional<bool> allow_guard_findings;
  std::optional<std::filesystem::path> tls_cert;
  std::optional<std::filesystem::path> tls_key;
  std::optional<std::filesystem::path> tls_client_ca;
  std::optional<bool> insecure_tcp;
  std::optional<std::string> socket_group;
  std::optional<uint64_t> max_calls_per_peer;
  std::optional<uint64_t> max_connections;
  std::optional<uint64_t> max_connections_per_peer;
  std::optional<std::chrono::seconds> listen_probe_interval;

  bool operator==(const ConfigLayer&) const = default;
};

// The settings the daemon runs with, every field decided.
struct DaemonConfig {
  // Endpoints to serve on ("unix:PATH" or "HOST:PORT"); never empty.
  std::vector<std::string> listen;
  std::filesystem::path cache_dir;
  // The kernel trees served, in order; never empty (the shipped tree,
  // unnamed, by default). Several are each named.
  std::vector<KernelTreeSource> kernels;
  // `--lock FILE` (jitd lint --write-lock): each locks the tree it names;
  // a locked tree serves exactly the instantiations and keys listed.
  std::vector<std::filesystem::path> locks;
  // The CUDA toolkit headers NVRTC compiles with (cuda_fp16.h, cccl/, ...);
  // watched for changes while the daemon runs (toolkit_watch.h).
  std::filesystem::path cuda_include;
  // Module kernels' nvcc, host compiler and tvm-ffi root; empty = found
  // (manifest::DetectModuleToolchain).
  std::filesystem::path nvcc;
  std::filesystem::path host_cxx;
  std::filesystem::path tvm_ffi_root;
  // Byte budget of the on-disk cache; 0 = unbounded.
  uint64_t max_cache_bytes = 0;
  // Compile worker processes.
  uint32_t workers = 1;
  // Architecture for requests that name none.
  std::string arch;
  // The fleet's archs (sm_ only), in the order given; empty = no fleet
  // set. Fleet requests get a fatbin of them plus the lowest's PTX.
  std::vector<std::string> fleet_archs;
  // Shared remote tier ("redis://HOST:PORT/DB", "rediss://..." or
  // "unix://PATH"); empty = none. See jitd_remote's remote.h.
  std::string remote;
  // The remote tier's AUTH password, read from this file (first line);
  // empty = the URL's password, if any.
  std::filesystem::path remote_password_file;
  // rediss://: CA bundle for the server's certificate (empty = the
  // system's), and a client certificate and key if the server wants one.
  std::filesystem::path remote_tls_ca;
  std::filesystem::path remote_tls_cert;
  std::filesystem::path remote_tls_key;
  // How long one remote call may take before it counts as a failure.
  std::chrono::milliseconds remote_timeout{0};
  // The largest remote value read: a bigger one is refused before it is
  // buffered (and not read again for a while), whoever wrote it.
  uint64_t remote_max_value_bytes = 0;
  // A secret shared by the fleet (file content, at least 16 bytes): values
  // in the remote tier are signed with it and unsigned ones are refused.
  // Empty: values are only checksummed.
  std::filesystem::path remote_signing_key_file;
  // Sealed seed bundles (jitd bundle create) mounted read-only below the
  // disk cache, asked in this order; each is verified whole at start, and
  // must be signed with the key above when there is one.
  std::vector<std::filesystem::path> bundles;
  // Prometheus endpoint ("HOST:PORT"); empty = none.
  std::string metrics_listen;
  // Token file guarding state-changing admin calls; empty = no guard.
  std::filesystem::path admin_token_file;
  // Compiles allowed to wait for a worker; one more is RESOURCE_EXHAUSTED.
  uint64_t max_queue = 0;
  // Bytes of cubins the daemon keeps in memory in front of the disk cache.
  uint64_t hot_cache_bytes = 0;
  // How long a compile failure is answered from memory without recompiling.
  std::chrono::seconds negative_ttl{0};
  // After a toolkit change (running, or since the cache was last served):
  // the rewarm_count most used
  // instantiations of the cache are compiled under the toolchain in use
  // now, in the background at warm priority, for at most rewarm_seconds
  // (serving/rewarm.h). 0 = off.
  uint64_t rewarm_count = 0;
  std::chrono::seconds rewarm_seconds{0};
  // Log one line per cache hit (compiles are always logged).
  bool log_hits = false;
  // Answer the local path (local_server.h) on the Unix sockets besides gRPC.
  bool local_path = true;
  // Serve even when the namespace guard's source check has findings.
  bool allow_guard_findings = false;
  // TLS for TCP addresses (PEM files): the server's certificate chain and
  // key, and optionally a CA whose client certificates are then required.
  // A TCP address without them is refused unless insecure_tcp.
  std::filesystem::path tls_cert;
  std::filesystem::path tls_key;
  std::filesystem::path tls_client_ca;
  bool insecure_tcp = false;
  // Group given the Unix sockets (mode 0660): who may call the daemon.
  // Empty: the daemon's primary group.
  std::string socket_group;
  // GetKernel, Warm and ListKernels calls one peer may have in flight
  // (serving/admission.h).
  uint64_t max_calls_per_peer = 0;
  // Connections open at once on the Unix sockets, and for one uid
  // (unix_acceptor.h); 0 = no bound. Unset: decided at start from the file
  // descriptor limit (fd_limit.h), and half of that for one uid.
  std::optional<uint64_t> max_connections;
  std::optional<uint64_t> max_connections_per_peer;
  // How often the daemon checks that its listeners still accept
  // (listener_probe.h); one that stops is an exit with kExitListenerDeaf.
  // 0 = never.
  std::chrono::seconds listen_probe_interval{0};
};

// 10 GiB: cubins are 10 KiB to a few MiB, so this holds every instantiation
// of a large model's kernels for several archs, yet stays a small share of
// a build machine's disk.
inline constexpr uint64_t kDefaultMaxCacheBytes = uint64_t{10} << 30;
// 256 waiting compiles: at the ~1 s a header-heavy compile takes, a full
// queue is minutes of work for a few workers, so a caller beyond it is
// better told at once (RESOURCE_EXHAUSTED) than left to time out.
inline constexpr uint64_t kDefaultMaxQueue = 256;
// Calls one peer may have in flight. On the Unix sockets a peer is a user
// (uid), so all ranks of one inference server share it: far above what a
// host's inference servers send at once, far below what exhausts threads.
inline constexpr uint64_t kDefaultMaxCallsPerPeer = 1024;
// 10 s between listener probes: a deaf daemon is restarted within about
// half a minute (three probes), at the cost of one connection per address
// every 10 s.
inline constexpr std::chrono::seconds kDefaultListenProbeInterval{10};
// The exit status of a daemon whose listener stopped accepting: EX_TEMPFAIL
// (sysexits.h), a failure a restart is expected to cure.
inline constexpr int kExitListenerDeaf = 75;
// 256 MiB of hot cubins: every instantiation of the shipped kernels for a
// few archs many times over, a small share of a serving host's memory.
inline constexpr uint64_t kDefaultHotCacheBytes = uint64_t{256} << 20;
// 30 s: long enough that a crash-looping client cannot keep a worker busy
// recompiling a broken kernel, short enough that a fixed source (after
// SIGHUP) or a transient cause is retried soon.
inline constexpr std::chrono::seconds kDefaultNegativeTtl{30};
// The default arch until the compiler can ask the GPU: Hopper, the
// architecture jitd is deployed on first.
inline constexpr std::string_view kDefaultArch = "sm_90";
// 1 s per remote call: a 4 MiB cubin crosses a 1 Gbit/s link in ~35 ms, so
// only a store that is down or wedged reaches it, and then a local miss
// costs at most this before the circuit breaker stops asking.
inline constexpr std::chrono::milliseconds kDefaultRemoteTimeout{1000};
// Several times the largest cubin the shipped kernels make (a few MiB).
inline constexpr uint64_t kDefaultRemoteMaxValueBytes = uint64_t{64} << 20;

// $XDG_CACHE_HOME/jitd, else ~/.cache/jitd.
std::filesystem::path DefaultCacheDir();
// <prefix>/share/jitd/kernels next to an installed binary, else the source
// tree's kernels/ (a build tree).
std::filesystem::path DefaultKernelsDir();

// Merges defaults, then `file`, then `flags`.
DaemonConfig ResolveConfig(const ConfigLayer& file, const ConfigLayer& flags);

// Checks of single values, shared by the config file and the command line
// so both accept exactly the same things. INVALID_ARGUMENT with a message
// that does not name the source: callers prefix the flag or file:line:key.
absl::Status CheckListenAddress(const std::string& address);
absl::Status CheckArch(const std::string& arch);
// "sm_90a,sm_100a,sm_120": each a CheckArch arch, none twice, at least one.
absl::StatusOr<std::vector<std::string>> ParseFleetArchs(const std::string& list);  // sm_NN[N][a|f]
absl::Status CheckGroupName(const std::string& group);                              // an existing group's name
absl::Status CheckRemoteUrl(const std::string& url);                                // remote.h's ParseRemoteUrl
absl::Status CheckRemoteTimeout(int64_t milliseconds);                              // 10..60000
absl::Status CheckRemoteMaxValueBytes(uint64_t bytes);                              // 1M..4G
absl::Status CheckMetricsListen(const std::string& address);                        // HOST:PORT
absl::Status CheckWorkers(int64_t workers);                                         // 1..1024
absl::Status CheckMaxQueue(int64_t max_queue);                                      // 1..1000000
absl::Status CheckNegativeTtl(int64_t seconds);                                     // 0..86400 (0 = off)

}  // namespace jitd::daemon
