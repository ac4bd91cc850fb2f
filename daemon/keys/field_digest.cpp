#include "jitd/keys/field_digest.h"

#include <openssl/evp.h>

#include <cstdint>

#include "jitd/base/hex.h"

namespace jitd::keys {

struct FieldDigest::Context {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
};

FieldDigest::FieldDigest() : ctx_(new Context) { EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr); }

FieldDigest::~FieldDigest() {
  EVP_MD_CTX_free(ctx_->md);
  delete ctx_;
}

void FieldDigest::Field(std::string_view tag, std::string_view value) {
  EVP_DigestUpdate(ctx_->md, tag.data(), tag.size());
  const uint64_t size = value.size();
  EVP_DigestUpdate(ctx_->md, &size, sizeof size);
  EVP_DigestUpdate(ctx_->md, value.data(), value.size());
}

std::string FieldDigest::Hex() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned size = 0;
  EVP_DigestFinal_ex(ctx_->md, out, &size);
  return hex::Encode(std::string_view(reinterpret_cast<const char*>(out), size));
}

}  // namespace jitd::keys
