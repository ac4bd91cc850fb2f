// Fatbins as ReadFatbin takes them: every malformed image must be refused
// cleanly (bounds-checked, allocating no more than the input holds), and
// every image it accepts must be written back (WriteFatbin) to bytes that
// read back to the same images.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "jitd/fatbin.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto images = jitd::fatbin::ReadFatbin(bytes);
  if (!images.ok()) return 0;
  auto written = jitd::fatbin::WriteFatbin(*images);
  // What was read may still be refused by the writer (a PTX without
  // `.version`, two images of one target); what it writes must read back.
  if (!written.ok()) return 0;
  auto again = jitd::fatbin::ReadFatbin(*written);
  if (!again.ok() || *again != *images) std::abort();
  return 0;
}
