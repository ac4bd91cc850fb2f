// Incremental SHA-256 over tagged, length-prefixed fields, so that
// ("ab","c") and ("a","bc") differ: what content keys, tree fingerprints
// and compile-job digests are made of.
#pragma once

#include <string>
#include <string_view>

#include "jitd/base/digest.h"

namespace jitd::keys {

class FieldDigest {
 public:
  FieldDigest() = default;
  FieldDigest(const FieldDigest&) = delete;
  FieldDigest& operator=(const FieldDigest&) = delete;

  // Adds `tag`, then the length of `value` (8 bytes, host order), then
  // `value`.
  void Field(std::string_view tag, std::string_view value);
  // The digest of every field so far, as 64 hex digits; once only.
  std::string Hex();

 private:
  digest::Sha256 sha_;
};

}  // namespace jitd::keys
