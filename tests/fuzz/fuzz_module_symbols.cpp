// Compiled modules as the namespace guard's module check reads them (ELF64
// cubins, PTX text): any bytes must be answered (symbols, or a refusal)
// without reading out of bounds, and every symbol read must go through the
// namespace rule and the demangler as a finding would.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "guard/module_symbols.h"
#include "guard/namespace_guard.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto symbols = jitd::guard::detail::ModuleExternalSymbols(bytes);
  if (symbols.ok()) {
    const std::vector<std::string> rule = {"team", "ops"};
    for (const auto& s : *symbols) (void)jitd::guard::detail::MangledInNamespace(s.name, rule);
  }
  (void)jitd::guard::ModuleSymbolsOutside(bytes, "team::ops");
  return 0;
}
