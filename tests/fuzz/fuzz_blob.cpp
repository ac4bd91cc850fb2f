// Blob files as read from disk: DecodeBlob must reject every malformed
// input cleanly, and whatever it accepts must re-encode to a blob that
// decodes to the same entry. DecodeBlobInPlace (the serving path) must
// accept exactly the same inputs, give the same entry, and leave what it
// rejects unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "jitd/cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  jitd::cache::EntryMeta meta;
  std::string cubin;
  const bool ok = jitd::cache::DecodeBlob(bytes, &meta, &cubin).ok();
  std::string in_place(bytes);
  jitd::cache::EntryMeta in_place_meta;
  if (jitd::cache::DecodeBlobInPlace(in_place, &in_place_meta).ok() != ok) std::abort();
  if (ok ? !(in_place_meta == meta) || in_place != cubin : in_place != bytes) std::abort();
  if (!ok) return 0;
  jitd::cache::EntryMeta again;
  std::string again_cubin;
  if (!jitd::cache::DecodeBlob(jitd::cache::EncodeBlob(meta, cubin), &again, &again_cubin).ok()) std::abort();
  if (!(again == meta) || again_cubin != cubin) std::abort();
  return 0;
}
