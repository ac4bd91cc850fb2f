// kernels.toml as an operator writes it: Manifest::Parse must answer every
// input with a manifest or an error, never crash or hang.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "manifest/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto manifest = jitd::manifest::Manifest::Parse(text, "fuzz/kernels.toml");
  if (manifest.ok()) {
    for (const auto& kernel : manifest->kernels) (void)jitd::manifest::Manifest::Instantiations(kernel);
  }
  return 0;
}
