// jitd's shared remote tier: the one public header of `jitd_remote`.
//
// Many daemons (one per GPU node) put a shared store behind their local
// caches, so that a fleet compiles each kernel once:
//
//   local miss -> RemoteTier::Fetch   (read-through: a verified hit is
//                                      stored locally by the caller)
//              -> RemoteTier::AcquireLease
//                   acquired: compile, RemoteTier::Store, ReleaseLease
//                   held elsewhere: poll Fetch until the value appears, or
//                   take the lease over once its holder stops renewing it
//
// Two layers, as in ccache's storage/remote:
//  * RemoteBackend: a store of whole values by key, plus the few atomic
//    operations leases need. One small file per store (redis_backend.cpp);
//    another store (memcached, S3, a gRPC cache) is another implementation.
//  * RemoteTier: what jitd needs on top, for any backend: values are the
//    cache's self-describing blobs (EncodeBlob), verified on every read (a
//    corrupt or misfiled value is deleted and never served); a circuit
//    breaker so that a remote store that is down, slow or full costs at
//    most a few timeouts per episode and never fails a request; leases that
//    a background thread renews while their compile runs; counters.
//
// Errors never leave RemoteTier as failures of the caller's request: every
// method answers with what to do next (a miss, "unavailable": go local).
//
// Thread safety: RemoteBackend implementations and RemoteTier are safe to
// call from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "jitd/cache.h"

namespace jitd::cache {

// ---------------------------------------------------------------------------
// Where the remote store is.
//
//   redis://[[USER]:PASSWORD@]HOST:PORT[/DB]     plain TCP
//   rediss://[[USER]:PASSWORD@]HOST:PORT[/DB]    TLS
//   unix://PATH[?db=N]                           a Redis Unix socket
//
// HOST may be a name, an IPv4 address or a bracketed IPv6 address. A
// password in the URL is accepted, but it shows in `ps` and in config
// files: RemoteOptions::password (from --remote-password-file) wins.
struct RemoteUrl {
  enum class Kind { kTcp, kUnix };
  Kind kind = Kind::kTcp;
  bool tls = false;
  std::string host;  // without brackets
  int port = 6379;
  std::string path;  // kUnix
  int db = 0;
  std::string user;
  std::string password;

  // The URL without its password, for logs and Stats.
  std::string Redacted() const;
};

// INVALID_ARGUMENT naming what is wrong (port range, db, scheme, ...).
absl::StatusOr<RemoteUrl> ParseRemoteUrl(std::string_view url);

struct RemoteOptions {
  // Connecting (TCP, TLS handshake, AUTH, SELECT) may take this long.
  std::chrono::milliseconds connect_timeout{500};
  // One command (send and whole reply) may take this long. A 4 MiB value
  // over a 1 Gbit/s link takes ~35 ms; this bounds what a hung server
  // costs a request that misses locally.
  std::chrono::milliseconds io_timeout{1000};
  // AUTH password; overrides the URL's when set.
  std::optional<std::string> password;
  // rediss://: the CA bundle that signs the server's certificate (PEM);
  // empty = the system's trust store. Optional client certificate and key
  // for servers that require them (tls-auth-clients yes).
  std::filesystem::path tls_ca;
  std::filesystem::path tls_cert;
  std::filesystem::path tls_key;
  // Idle connections kept for reuse; more are opened when calls overlap.
  size_t max_idle_connections = 8;
  // A reply larger than this fails the call (RESOURCE_EXHAUSTED): a broken
  // or hostile store cannot make the daemon buffer gigabytes. Far above
  // any cubin (a few MiB) and the 256 MiB jitd ever sends a client.
  size_t max_reply_bytes = size_t{512} << 20;
};

// ---------------------------------------------------------------------------
// A store of whole values by key. Every method may fail with UNAVAILABLE
// (cannot connect, connection lost), DEADLINE_EXCEEDED (io_timeout passed),
// RESOURCE_EXHAUSTED (the store is full), UNAUTHENTICATED or INTERNAL (the
// store answered something unexpected); the message names the store.
class RemoteBackend {
 public:
  virtual ~RemoteBackend() = default;

  // The values of `keys`, in order; nullopt for a key that has none. Gives
  // up at `deadline` too, when it comes before the store's own timeouts.
  virtual absl::StatusOr<std::vector<std::optional<std::string>>> GetMany(
      const std::vector<std::string>& keys,
      std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max()) = 0;
  // Sets `key` to `value`, expiring after `ttl` (0 = never).
  virtual absl::Status Set(const std::string& key, std::string_view value, std::chrono::milliseconds ttl) = 0;
  // Sets `key` only when it has no value; whether it did.
  virtual absl::StatusOr<bool> SetIfAbsent(const std::string& key, std::string_view value,
                                           std::chrono::milliseconds ttl) = 0;
  // Moves `key`'s expiry to now + ttl only while it holds `value`; whether
  // it did (false: expired, or someone else's value).
  virtual absl::StatusOr<bool> ExpireIfEquals(const std::string& key, std::string_view value,
                                              std::chrono::milliseconds ttl) = 0;
  // Deletes `key` only while it holds `value`; whether it did.
  virtual absl::StatusOr<bool> DeleteIfEquals(const std::string& key, std::string_view value) = 0;
  virtual absl::Status Delete(const std::string& key) = 0;
  // The store, for logs ("redis://cache:6379/0"), never with a password.
  virtual std::string Describe() const = 0;
};

// A Redis (or Redis-protocol) store: RESP over TCP, TLS or a Unix socket,
// with a small connection pool. Connects lazily: opening never fails for a
// store that is down (the first call does).
absl::StatusOr<std::unique_ptr<RemoteBackend>> OpenRedisBackend(const RemoteUrl& url, const RemoteOptions& options);

// ---------------------------------------------------------------------------
struct RemoteTierOptions {
  // Key prefix in the store; the version changes when the value format does.
  std::string prefix = "jitd:v1:";
  // Values expire after this long in the store (0 = never: configure the
  // store to evict least-recently-used keys instead, see OPERATIONS.md).
  std::chrono::milliseconds value_ttl{0};
  // A lease lapses this long after its holder last renewed it; the holder
  // renews every lease_ttl / 3. A daemon killed mid-compile delays the
  // others by at most this much before one of them takes over.
  std::chrono::milliseconds lease_ttl{10000};
  // Consecutive failures that open the circuit; while it is open no call
  // reaches the store. It stays open for breaker_min_open, doubling after
  // each failed probe up to breaker_max_open; then one call probes it.
  int breaker_failures = 3;
  std::chrono::milliseconds breaker_min_open{1000};
  std::chrono::milliseconds breaker_max_open{30000};
  // Who holds a lease: unique per process ("host:pid:random" by default).
  std::string owner;
  // A secret the whole fleet shares (at least 16 bytes), or empty. With
  // it, every value and failure marker is written with an HMAC-SHA256 tag
  // over its key and bytes, and a value without a valid tag is treated as
  // corrupt: whoever can write the store but lacks the secret cannot make
  // the fleet serve a cubin (a checksum alone stops damage, not forgery).
  std::string signing_key;
  // A key whose value was refused (too large to read, or without a valid
  // signature) is not read again for this long: each Fetch of it is a miss
  // without a round trip. At most refused_keys are remembered.
  std::chrono::milliseconds refuse_for{std::chrono::minutes(5)};
  size_t refused_keys = 4096;
};

// What Fetch found.
struct RemoteFetch {
  enum class Kind {
    kHit,          // entry holds a verified blob for the key
    kMiss,         // the store has nothing for the key
    kFailed,       // another daemon's compile of the key failed recently
    kUnavailable,  // the store could not be asked (error, circuit open)
  };
  Kind kind = Kind::kUnavailable;
  EntryMeta meta;       // kHit
  std::string cubin;    // kHit
  std::string failure;  // kFailed: the status message that daemon got
};

enum class LeaseResult {
  kAcquired,     // this process compiles; ReleaseLease when done
  kHeld,         // another process compiles it now
  kUnavailable,  // the store could not be asked: compile locally
};

class RemoteTier {
 public:
  struct Stats {
    uint64_t fetches = 0;  // Fetch calls that reached the store (a wait's repeated polls count once)
    uint64_t hits = 0;
    uint64_t misses = 0;
    uint64_t failures_seen = 0;    // kFailed answers
    uint64_t corrupt = 0;          // values that failed verification (never served; damaged ones deleted)
    uint64_t unsigned_values = 0;  // ... of which had no valid signature
    uint64_t oversized = 0;        // values larger than RemoteOptions::max_reply_bytes: refused unread
    // Module shared objects refused by a daemon without a signing key: a
    // module is code, and a checksum cannot say who wrote it.
    uint64_t unsigned_modules = 0;
    uint64_t not_reread = 0;  // Fetches not sent: the key's value was refused (oversized, unsigned) recently
    uint64_t stores = 0;      // values written
    uint64_t leases_acquired = 0;
    uint64_t leases_busy = 0;  // AcquireLease found another holder
    uint64_t leases_lost = 0;  // a renewal found the lease gone
    uint64_t errors = 0;       // calls that failed (any operation)
    uint64_t skipped = 0;      // calls not made because the circuit was open
    uint64_t episodes = 0;     // times the circuit opened
    bool circuit_open = false;
  };

  RemoteTier(std::unique_ptr<RemoteBackend> backend, RemoteTierOptions options);
  // Releases the leases still held and stops the renewal thread.
  ~RemoteTier();
  RemoteTier(const RemoteTier&) = delete;
  RemoteTier& operator=(const RemoteTier&) = delete;

  // One round trip: the value and the failure marker of `key`.
  // `deadline`: given up then, if sooner than the store's timeouts.
  // `counted` false: a repeated poll, not counted as another miss.
  RemoteFetch Fetch(const std::string& key,
                    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max(),
                    bool counted = true);
  // Write-back of a published entry (errors are counted, not returned).
  void Store(const EntryMeta& meta, std::string_view cubin);
  // Remembers, fleet-wide for `ttl`, that compiling `key` failed with
  // `message` (NVRTC rejected the program: every daemon would fail too).
  void StoreFailure(const std::string& key, std::string_view message, std::chrono::milliseconds ttl);

  // Takes the compile lease of `key`. An acquired lease is renewed in the
  // background until ReleaseLease.
  LeaseResult AcquireLease(const std::string& key, bool counted = true);
  void ReleaseLease(const std::string& key);

  // One round trip to the store, outside the circuit breaker and the
  // counters: whether it answers now (for the daemon's start-up log).
  absl::Status Check();

  Stats stats() const;
  std::string Describe() const { return backend_->Describe(); }
  const RemoteTierOptions& options() const { return options_; }

 private:
  enum class Gate { kClosed, kProbe, kOpen };
  // Whether a call may go to the store now (and whether it is the probe).
  Gate Admit();
  // Records a call's outcome for the breaker; logs once per episode.
  // `gate` is what Admit said for the call (renewals pass kClosed): only
  // the probe's own outcome closes or re-opens an open circuit.
  void Record(const absl::Status& status, const char* op, Gate gate);
  void RenewLoop();
  // With a signing key: `bytes` plus its tag; without: `bytes`.
  std::string Sign(const std::string& store_key, std::string_view bytes) const;
  // The signed bytes without their tag, or nullopt when the tag is missing
  // or wrong. Without a signing key: `value` as it is.
  std::optional<std::string_view> Verified(const std::string& store_key, std::string_view value) const;

  // Remembers that `key`'s value was refused. Requires mu_.
  void RefuseLocked(const std::string& key);
  // A value refused before it is served (too large; a module with no key
  // to verify it): counted in `why`, not read again a while (RefuseLocked),
  // and answered as a miss. Requires mu_.
  RemoteFetch RefusedMissLocked(const std::string& key, bool counted, uint64_t Stats::*why);
  // Whether `key`'s value was refused within refuse_for. Requires mu_.
  bool RefusedLocked(const std::string& key);

  const std::unique_ptr<RemoteBackend> backend_;
  const RemoteTierOptions options_;
  // Keys whose value was refused, and until when; guarded by mu_.
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> refused_;

  mutable std::mutex mu_;
  Stats stats_;                   // guarded by mu_
  int consecutive_failures_ = 0;  // guarded by mu_
  std::chrono::steady_clock::time_point open_until_{};
  std::chrono::milliseconds open_for_{0};
  bool probing_ = false;
  std::chrono::steady_clock::time_point episode_start_{};
  uint64_t episode_skipped_ = 0;

  std::mutex lease_mu_;
  std::condition_variable lease_cv_;
  std::set<std::string> leases_;  // keys (unprefixed) this process holds
  bool stopping_ = false;
  std::thread renewer_;
};

// "host:pid:16 random hex digits": a lease owner no other process shares.
std::string DefaultLeaseOwner();

}  // namespace jitd::cache
