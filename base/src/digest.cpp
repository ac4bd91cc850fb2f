#include "jitd/base/digest.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "jitd/base/hex.h"

namespace jitd::digest {
namespace {

const EVP_MD* FetchedSha256() {
  static EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return md;
}

EVP_MAC* FetchedHmac() {
  static EVP_MAC* const mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  return mac;
}

}  // namespace

struct Sha256::State {
  EVP_MD_CTX* md = nullptr;    // plain SHA-256
  EVP_MAC_CTX* mac = nullptr;  // HMAC
  bool ok = false;
};

Sha256::Sha256() : state_(new State) {
  state_->md = EVP_MD_CTX_new();
  state_->ok = state_->md != nullptr && FetchedSha256() != nullptr &&
               EVP_DigestInit_ex(state_->md, FetchedSha256(), nullptr) == 1;
}

Sha256::Sha256(Hmac_, std::string_view key) : state_(new State) {
  state_->mac = FetchedHmac() != nullptr ? EVP_MAC_CTX_new(FetchedHmac()) : nullptr;
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0), OSSL_PARAM_END};
  state_->ok = state_->mac != nullptr &&
               EVP_MAC_init(state_->mac, reinterpret_cast<const unsigned char*>(key.data()), key.size(), params) == 1;
}

Sha256 Sha256::Hmac(std::string_view key) { return Sha256(Hmac_{}, key); }

Sha256::Sha256(Sha256&& other) noexcept : state_(other.state_) { other.state_ = nullptr; }

Sha256::~Sha256() {
  if (state_ == nullptr) return;
  EVP_MD_CTX_free(state_->md);
  EVP_MAC_CTX_free(state_->mac);
  delete state_;
}

void Sha256::Update(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (state_->md != nullptr) state_->ok = state_->ok && EVP_DigestUpdate(state_->md, p, bytes.size()) == 1;
  if (state_->mac != nullptr) state_->ok = state_->ok && EVP_MAC_update(state_->mac, p, bytes.size()) == 1;
}

absl::StatusOr<std::string> Sha256::Final() {
  unsigned char out[EVP_MAX_MD_SIZE];
  size_t len = 0;
  if (state_->md != nullptr) {
    unsigned int n = 0;
    state_->ok = state_->ok && EVP_DigestFinal_ex(state_->md, out, &n) == 1;
    len = n;
  } else if (state_->mac != nullptr) {
    state_->ok = state_->ok && EVP_MAC_final(state_->mac, out, &len, sizeof(out)) == 1;
  }
  if (!state_->ok || len != kSha256Bytes) {
    return absl::InternalError("OpenSSL could not compute a SHA-256 (does its provider offer SHA256 and HMAC?)");
  }
  return std::string(reinterpret_cast<const char*>(out), len);
}

absl::StatusOr<std::string> Sha256Of(std::string_view bytes) {
  Sha256 sha;
  sha.Update(bytes);
  return sha.Final();
}

std::string Sha256::FinalHex() {
  absl::StatusOr<std::string> raw = Final();
  if (!raw.ok()) {
    std::fprintf(stderr, "jitd: %s\n", std::string(raw.status().message()).c_str());
    std::abort();
  }
  return hex::Encode(*raw);
}

std::string Sha256Hex(std::string_view bytes) {
  Sha256 sha;
  sha.Update(bytes);
  return sha.FinalHex();
}

bool TagsEqual(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace jitd::digest
