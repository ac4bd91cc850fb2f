// GetKernel requests as a client sends them, resolved against a real
// kernels tree: every field comes from the input (NUL-separated: kernel,
// arch, then key=value params and options). Resolve must answer each with
// a program or an error, and a program it answers must stay inside the
// tree: no -I, no path, no option outside the allow-list.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "manifest/manifest.h"

namespace {

const jitd::manifest::Resolver& TheResolver() {
  static const auto* resolver = [] {
    auto toolchain = jitd::manifest::Toolchain::Detect();
    auto tree = jitd::manifest::KernelTree::Load(JITD_FUZZ_KERNELS_DIR);
    if (!toolchain.ok() || !tree.ok()) std::abort();
    auto r = jitd::manifest::Resolver::Create(*tree, *toolchain, "sm_90");
    if (!r.ok()) std::abort();
    return r->release();
  }();
  return *resolver;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> fields(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      fields.emplace_back();
    } else {
      fields.back() += static_cast<char>(data[i]);
    }
  }
  jitd::manifest::KernelRequest request;
  request.kernel = fields[0];
  if (fields.size() > 1) request.arch = fields[1];
  for (size_t i = 2; i < fields.size(); ++i) {
    const size_t eq = fields[i].find('=');
    if (fields[i].starts_with("-")) {
      request.options.push_back(fields[i]);
    } else if (eq != std::string::npos) {
      request.params[fields[i].substr(0, eq)] = fields[i].substr(eq + 1);
    }
  }
  auto resolved = TheResolver().Resolve(request);
  if (!resolved.ok()) {
    if (resolved.status().message().empty()) std::abort();
    return 0;
  }
  for (const std::string& option : resolved->request_options) {
    for (const char* forbidden : {"-I", "--include-path", "--pre-include", "-include", "-pch", "--pch", "--create-pch",
                                  "--use-pch", "-arch", "--gpu-architecture", "-std", "--std"}) {
      if (option.starts_with(forbidden)) std::abort();  // the allow-list let a path or a daemon option through
    }
  }
  return 0;
}
