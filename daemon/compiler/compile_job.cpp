#include "compile_job.h"

#include <openssl/evp.h>

#include <cstdint>
#include <string_view>

#include "jitd/base/hex.h"

namespace jitd::compiler {
namespace {

// Incremental SHA-256 over tagged, length-prefixed fields, so that
// ("ab","c") and ("a","bc") differ.
class Digest {
 public:
  Digest() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
  ~Digest() { EVP_MD_CTX_free(ctx_); }
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;

  void Field(std::string_view tag, std::string_view value) {
    EVP_DigestUpdate(ctx_, tag.data(), tag.size());
    const std::uint64_t size = value.size();
    EVP_DigestUpdate(ctx_, &size, sizeof size);
    EVP_DigestUpdate(ctx_, value.data(), value.size());
  }
  std::string Hex() {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned size = 0;
    EVP_DigestFinal_ex(ctx_, out, &size);
    return hex::Encode(std::string_view(reinterpret_cast<const char*>(out), size));
  }

 private:
  EVP_MD_CTX* ctx_;
};

}  // namespace

std::string JobDigest(const CompileJob& job) {
  Digest d;
  d.Field("jitd-compile-job", "1");
  d.Field("program", job.program_name);
  d.Field("source", job.source);
  d.Field("headers", std::to_string(job.headers.size()));
  for (const CompileHeader& header : job.headers) {
    d.Field("header-name", header.name);
    d.Field("header-path", header.path);
    d.Field("header", header.content);
  }
  d.Field("options", std::to_string(job.options.size()));
  for (const std::string& option : job.options) d.Field("option", option);
  d.Field("exprs", std::to_string(job.name_expressions.size()));
  for (const std::string& expr : job.name_expressions) d.Field("expr", expr);
  d.Field("log-root", job.log_root);
  return d.Hex();
}

}  // namespace jitd::compiler
