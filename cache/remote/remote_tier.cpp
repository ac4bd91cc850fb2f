// RemoteTier: verification, circuit breaker and leases over a RemoteBackend.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <random>

#include "jitd/base/digest.h"
#include "jitd/base/text.h"
#include "jitd/blob.h"
#include "remote/remote.h"

namespace jitd::cache {
namespace {

using Clock = std::chrono::steady_clock;
using text::Cat;

std::string Short(const std::string& key) { return key.substr(0, 12); }

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A full store refuses writes but still answers reads: it is not a reason
// to stop asking it, so it does not count towards opening the circuit.
bool CountsAgainstStore(const absl::Status& s) { return !s.ok() && !absl::IsResourceExhausted(s); }

// A signed value ends with this marker and a 32-byte HMAC-SHA256 tag over
// (store key, NUL, value): the key is covered, so a signed value cannot be
// moved under another key either.
constexpr std::string_view kSignatureMarker = "JITDHMAC";
constexpr size_t kTagBytes = 32;

std::string Tag(const std::string& secret, const std::string& store_key, std::string_view bytes) {
  digest::Sha256 mac = digest::Sha256::Hmac(secret);
  mac.Update(std::string_view(store_key.data(), store_key.size() + 1));
  mac.Update(bytes);
  absl::StatusOr<std::string> tag = mac.Final();
  // No tag at all (an OpenSSL without HMAC) verifies nothing and signs
  // nothing anyone accepts: fail closed.
  if (!tag.ok()) return Cat(std::string(kTagBytes, '\0'), "unavailable");
  return *std::move(tag);
}

}  // namespace

std::string DefaultLeaseOwner() {
  char host[256] = {0};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "unknown-host");
  std::random_device rd;
  uint64_t r = (uint64_t{rd()} << 32) ^ rd();
  char out[512];
  std::snprintf(out, sizeof(out), "%s:%d:%016llx", host, static_cast<int>(::getpid()),
                static_cast<unsigned long long>(r));
  return out;
}

RemoteTier::RemoteTier(std::unique_ptr<RemoteBackend> backend, RemoteTierOptions options)
    : backend_(std::move(backend)), options_([&] {
        if (options.owner.empty()) options.owner = DefaultLeaseOwner();
        return options;
      }()) {
  renewer_ = std::thread([this] { RenewLoop(); });
}

RemoteTier::~RemoteTier() {
  std::set<std::string> held;
  {
    std::lock_guard lock(lease_mu_);
    stopping_ = true;
    held.swap(leases_);
  }
  lease_cv_.notify_all();
  renewer_.join();
  // Leases of compiles that never finished (shutdown): let the fleet go on
  // at once instead of after lease_ttl.
  for (const auto& key : held) (void)backend_->DeleteIfEquals(Cat(options_.prefix, "lease:", key), options_.owner);
}

RemoteTier::Gate RemoteTier::Admit() {
  std::lock_guard lock(mu_);
  if (!stats_.circuit_open) return Gate::kClosed;
  if (Clock::now() >= open_until_ && !probing_) {
    probing_ = true;
    return Gate::kProbe;
  }
  ++stats_.skipped;
  ++episode_skipped_;
  return Gate::kOpen;
}

void RemoteTier::Record(const absl::Status& status, const char* op, Gate gate) {
  std::lock_guard lock(mu_);
  // Only the probe's own outcome closes or re-opens an open circuit: a
  // call admitted before the circuit opened (or a renewal) that ends
  // while it is open says nothing about the store now.
  const bool is_probe = gate == Gate::kProbe;
  if (is_probe) probing_ = false;
  if (!CountsAgainstStore(status)) {
    if (!status.ok()) ++stats_.errors;
    consecutive_failures_ = 0;
    if (stats_.circuit_open && is_probe) {
      spdlog::info("remote tier {} is back after {:.1f} s; {} calls went to the local path meanwhile",
                   backend_->Describe(), Seconds(Clock::now() - episode_start_), episode_skipped_);
      stats_.circuit_open = false;
    }
    return;
  }
  ++stats_.errors;
  ++consecutive_failures_;
  if (stats_.circuit_open) {
    if (is_probe) {
      open_for_ = std::min(open_for_ * 2, options_.breaker_max_open);
      open_until_ = Clock::now() + open_for_;
      spdlog::debug("remote tier {} still unavailable ({}: {}); next try in {} ms", backend_->Describe(), op,
                    status.ToString(), open_for_.count());
    }
    return;
  }
  if (consecutive_failures_ < options_.breaker_failures) {
    spdlog::debug("remote tier {}: {} failed: {}", backend_->Describe(), op, status.ToString());
    return;
  }
  // Once per episode: every request would otherwise log the same outage.
  stats_.circuit_open = true;
  ++stats_.episodes;
  episode_start_ = Clock::now();
  episode_skipped_ = 0;
  open_for_ = options_.breaker_min_open;
  open_until_ = Clock::now() + open_for_;
  spdlog::warn(
      "remote tier {} is unavailable ({} failed: {}); requests are served from the local cache and compiled "
      "locally. It is retried after {} ms, then less often; a line is logged when it is back",
      backend_->Describe(), op, status.ToString(), open_for_.count());
}

std::string RemoteTier::Sign(const std::string& store_key, std::string_view bytes) const {
  std::string out(bytes);
  if (options_.signing_key.empty()) return out;
  out += kSignatureMarker;
  out += Tag(options_.signing_key, store_key, bytes);
  return out;
}

std::optional<std::string_view> RemoteTier::Verified(const std::string& store_key, std::string_view value) const {
  const size_t trailer = kSignatureMarker.size() + kTagBytes;
  const bool has_tag =
      value.size() >= trailer && value.substr(value.size() - trailer, kSignatureMarker.size()) == kSignatureMarker;
  // Without a key of its own a daemon cannot check a tag, but the blob
  // under it is still checksummed: a signing fleet and one that is not
  // yet (a rollout) read each other's values instead of deleting them.
  if (options_.signing_key.empty()) return has_tag ? value.substr(0, value.size() - trailer) : value;
  if (!has_tag) return std::nullopt;
  std::string_view bytes = value.substr(0, value.size() - trailer);
  const std::string expected = Tag(options_.signing_key, store_key, bytes);
  if (expected.size() != kTagBytes) return std::nullopt;
  if (!digest::TagsEqual(expected, value.substr(value.size() - kTagBytes))) return std::nullopt;
  return bytes;
}

RemoteFetch RemoteTier::RefusedMissLocked(const std::string& key, bool counted, uint64_t Stats::*why) {
  ++(stats_.*why);
  RefuseLocked(key);
  if (counted) {
    ++stats_.fetches;
    ++stats_.misses;
  }
  RemoteFetch out;
  out.kind = RemoteFetch::Kind::kMiss;
  return out;
}

void RemoteTier::RefuseLocked(const std::string& key) {
  const auto now = Clock::now();
  if (refused_.size() >= options_.refused_keys) {
    for (auto it = refused_.begin(); it != refused_.end();) it = it->second <= now ? refused_.erase(it) : std::next(it);
    if (refused_.size() >= options_.refused_keys) refused_.erase(refused_.begin());
  }
  refused_[key] = now + options_.refuse_for;
}

bool RemoteTier::RefusedLocked(const std::string& key) {
  auto it = refused_.find(key);
  if (it == refused_.end()) return false;
  if (Clock::now() < it->second) return true;
  refused_.erase(it);
  return false;
}

RemoteFetch RemoteTier::Fetch(const std::string& key, Clock::time_point deadline, bool counted) {
  RemoteFetch out;
  {
    std::lock_guard lock(mu_);
    if (RefusedLocked(key)) {
      ++stats_.not_reread;
      if (counted) ++stats_.misses;
      out.kind = RemoteFetch::Kind::kMiss;
      return out;
    }
  }
  const Gate gate = Admit();
  if (gate == Gate::kOpen) return out;  // kUnavailable
  const std::string blob_key = Cat(options_.prefix, "blob:", key);
  const std::string fail_key = Cat(options_.prefix, "fail:", key);
  auto got = backend_->GetMany({blob_key, fail_key}, deadline);
  if (absl::IsResourceExhausted(got.status())) {
    // A value past the reply cap: the store answered (it is the value
    // that is wrong, not the store), and reading stopped at the cap.
    Record(absl::OkStatus(), "GET", gate);
    spdlog::warn(
        "remote tier {}: the value of {} is larger than this daemon reads ({}); refused unread for {} s, "
        "treated as a miss",
        backend_->Describe(), Short(key), std::string(got.status().message()),
        std::chrono::duration_cast<std::chrono::seconds>(options_.refuse_for).count());
    std::lock_guard lock(mu_);
    return RefusedMissLocked(key, counted, &Stats::oversized);
  }
  Record(got.status(), "GET", gate);
  if (!got.ok()) return out;
  auto& value = (*got)[0];
  auto& failure = (*got)[1];
  if (value) {
    std::optional<std::string_view> signed_bytes = Verified(blob_key, *value);
    absl::Status decoded = signed_bytes ? DecodeBlob(*signed_bytes, &out.meta, &out.cubin)
                                        : absl::PermissionDeniedError("it has no valid signature for this fleet's key");
    if (decoded.ok() && out.meta.key != key) {
      decoded = absl::DataLossError(Cat("it holds the entry of key ", Short(out.meta.key)));
    }
    if (decoded.ok() && options_.signing_key.empty() && IsHostSharedObject(out.cubin)) {
      // A module is code its client runs: without a fleet key, whoever can
      // write the store could make every server run theirs (a checksum only
      // stops damage). Refused here, where every read passes, and built by
      // this daemon instead; left in the store and not read again a while.
      spdlog::warn(
          "remote tier {}: the value of {} is a module kernel's shared object and this daemon has no "
          "--remote-signing-key-file to verify it with; not served, built here",
          backend_->Describe(), Short(key));
      std::lock_guard lock(mu_);
      return RefusedMissLocked(key, counted, &Stats::unsigned_modules);
    }
    if (decoded.ok()) {
      std::lock_guard lock(mu_);
      ++stats_.fetches;
      ++stats_.hits;
      out.kind = RemoteFetch::Kind::kHit;
      return out;
    }
    out.meta = {};
    out.cubin.clear();
    if (signed_bytes) {
      // Damaged: never served, and removed (only if it is still the value
      // read, not one another daemon has written since) so that the next
      // compile writes a good one.
      spdlog::warn("remote tier {}: the value of {} is corrupt ({}); deleted, treated as a miss", backend_->Describe(),
                   Short(key), std::string(decoded.message()));
      (void)backend_->DeleteIfEquals(blob_key, *value);
    } else {
      // Unsigned or signed with another key: never served, but left alone
      // (it may be a daemon's of a fleet that signs with another key, or
      // none yet); this daemon's write-back replaces it.
      spdlog::warn("remote tier {}: the value of {} has no valid signature for this fleet's key; not served",
                   backend_->Describe(), Short(key));
    }
    std::lock_guard lock(mu_);
    ++stats_.corrupt;
    if (!signed_bytes) {
      ++stats_.unsigned_values;
      RefuseLocked(key);  // left in the store: not read again and again
    }
  }
  std::optional<std::string_view> failure_text;
  if (failure) failure_text = Verified(fail_key, *failure);
  std::lock_guard lock(mu_);
  if (failure_text) {
    ++stats_.fetches;
    ++stats_.failures_seen;
    out.kind = RemoteFetch::Kind::kFailed;
    out.failure = std::string(*failure_text);
    return out;
  }
  if (counted) {
    ++stats_.fetches;
    ++stats_.misses;
  }
  out.kind = RemoteFetch::Kind::kMiss;
  return out;
}

void RemoteTier::Store(const EntryMeta& meta, std::string_view cubin) {
  const Gate gate = Admit();
  if (gate == Gate::kOpen) return;
  const std::string blob_key = Cat(options_.prefix, "blob:", meta.key);
  absl::Status stored = backend_->Set(blob_key, Sign(blob_key, EncodeBlob(meta, cubin)), options_.value_ttl);
  Record(stored, "SET", gate);
  if (stored.ok()) {
    std::lock_guard lock(mu_);
    ++stats_.stores;
  } else if (absl::IsResourceExhausted(stored)) {
    spdlog::debug("remote tier: {} not stored: {}", Short(meta.key), stored.ToString());
  }
}

void RemoteTier::StoreFailure(const std::string& key, std::string_view message, std::chrono::milliseconds ttl) {
  if (ttl.count() <= 0) return;
  const Gate gate = Admit();
  if (gate == Gate::kOpen) return;
  const std::string fail_key = Cat(options_.prefix, "fail:", key);
  Record(backend_->Set(fail_key, Sign(fail_key, message), ttl), "SET", gate);
}

LeaseResult RemoteTier::AcquireLease(const std::string& key, bool counted) {
  const Gate gate = Admit();
  if (gate == Gate::kOpen) return LeaseResult::kUnavailable;
  const std::string lease_key = Cat(options_.prefix, "lease:", key);
  auto taken = backend_->SetIfAbsent(lease_key, options_.owner, options_.lease_ttl);
  Record(taken.status(), "SET NX", gate);
  if (!taken.ok()) return LeaseResult::kUnavailable;
  if (!*taken) {
    // A SET NX repeated on a fresh connection (the first one's reply was
    // lost) finds the lease it took itself: that is ours.
    auto holder = backend_->GetMany({lease_key});
    if (!holder.ok() || (*holder)[0] != options_.owner) {
      std::lock_guard lock(mu_);
      if (counted) ++stats_.leases_busy;
      return LeaseResult::kHeld;
    }
  }
  {
    std::lock_guard lock(mu_);
    ++stats_.leases_acquired;
  }
  std::lock_guard lock(lease_mu_);
  leases_.insert(key);
  return LeaseResult::kAcquired;
}

void RemoteTier::ReleaseLease(const std::string& key) {
  {
    std::lock_guard lock(lease_mu_);
    if (leases_.erase(key) == 0) return;
  }
  // With the circuit open the lease simply lapses after lease_ttl.
  const Gate gate = Admit();
  if (gate == Gate::kOpen) return;
  Record(backend_->DeleteIfEquals(Cat(options_.prefix, "lease:", key), options_.owner).status(), "DEL lease", gate);
}

void RemoteTier::RenewLoop() {
  const auto period = std::max(options_.lease_ttl / 3, std::chrono::milliseconds(1));
  std::unique_lock lock(lease_mu_);
  while (!stopping_) {
    lease_cv_.wait_for(lock, period, [this] { return stopping_; });
    if (stopping_) break;
    std::vector<std::string> held(leases_.begin(), leases_.end());
    lock.unlock();
    for (const auto& key : held) {
      {
        std::lock_guard check(lease_mu_);
        if (stopping_) break;
        if (leases_.count(key) == 0) continue;  // released meanwhile
      }
      // Through the breaker like every call: with the store unavailable
      // the lease lapses, which is what other daemons then see anyway.
      const Gate gate = Admit();
      if (gate == Gate::kOpen) break;
      auto renewed = backend_->ExpireIfEquals(Cat(options_.prefix, "lease:", key), options_.owner, options_.lease_ttl);
      Record(renewed.status(), "PEXPIRE lease", gate);
      if (renewed.ok() && !*renewed) {
        bool still_held;
        {
          std::lock_guard check(lease_mu_);
          still_held = leases_.count(key) > 0;
        }
        if (!still_held) continue;  // released between the check and the renewal
        // Lapsed (this process was stalled past lease_ttl) or taken over:
        // the compile goes on; at worst two daemons compile the same key.
        spdlog::warn("remote tier {}: the compile lease of {} lapsed before it was renewed", backend_->Describe(),
                     Short(key));
        std::lock_guard slock(mu_);
        ++stats_.leases_lost;
      }
    }
    lock.lock();
  }
}

absl::Status RemoteTier::Check() { return backend_->GetMany({Cat(options_.prefix, "probe")}).status(); }

RemoteTier::Stats RemoteTier::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace jitd::cache
