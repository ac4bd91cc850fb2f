// SHA-256 and HMAC-SHA256: the one wrapper of OpenSSL's digests in jitd,
// for content keys and fingerprints, bundle seals and entry digests, and
// the shared tier's signatures. A library of its own (jitd_digest), so that
// what links jitd_base (the client) does not link OpenSSL.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace jitd::digest {

inline constexpr size_t kSha256Bytes = 32;

// SHA-256, or HMAC-SHA256 under a key, over bytes given in pieces. The
// digest is fetched from OpenSSL's provider once per process, not at each
// use (an implicit fetch is a locked lookup), since a bundle read takes one.
class Sha256 {
 public:
  // Plain SHA-256.
  Sha256();
  // HMAC-SHA256 under `key` (an empty key is an HMAC with an empty key).
  static Sha256 Hmac(std::string_view key);
  ~Sha256();
  Sha256(Sha256&& other) noexcept;
  Sha256& operator=(Sha256&&) = delete;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(std::string_view bytes);
  // The 32 bytes; once only. An error when OpenSSL could not compute them
  // (a provider without SHA-256 or HMAC): callers fail closed.
  absl::StatusOr<std::string> Final();
  // Final() as 64 lower-case hex digits, for keys and fingerprints: an
  // OpenSSL without SHA-256 cannot run jitd at all, so this aborts with a
  // message rather than return a digest that matches nothing.
  std::string FinalHex();

 private:
  struct Hmac_ {};
  Sha256(Hmac_, std::string_view key);
  struct State;
  State* state_;
};

// SHA-256 of `bytes`, 32 raw bytes.
absl::StatusOr<std::string> Sha256Of(std::string_view bytes);

// SHA-256 of `bytes` as 64 lower-case hex digits (Sha256::FinalHex).
std::string Sha256Hex(std::string_view bytes);

// Whether two MACs are equal, in time that depends on their length only
// (never on where they differ), so that a forger learns nothing from how
// long a refusal takes. Different lengths are unequal.
bool TagsEqual(std::string_view a, std::string_view b);

}  // namespace jitd::digest
