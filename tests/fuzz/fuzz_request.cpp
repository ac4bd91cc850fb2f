// GetKernel requests as a client sends them, resolved against a real
// kernels tree: every field comes from the input (NUL-separated: kernel,
// arch, then key=value params and options). Resolve must answer each with
// a program or an error, and a program it answers must stay inside the
// tree: no -I, no path, no option outside the allow-list.
//
// An input whose kernel starts with "@adhoc:" is an ad-hoc module spec
// (load_jit's form) for the project's module tree, which allows them:
// fields "s:PATH" (sources), "i:DIR" (include dirs), "e:NAME=EXPR"
// (exports), "o:OPTION" (options), "f" (send the tree's real fingerprint).
// A spec it resolves must stage tree files only and export expressions
// that cannot read a file or add a directive.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "manifest/manifest.h"

namespace {

// The module tree under a module toolchain given outright (nothing to
// detect: resolution only).
const jitd::manifest::Resolver& ModuleResolver() {
  static const auto* resolver = [] {
    auto toolchain = jitd::manifest::Toolchain::Detect();
    auto tree = jitd::manifest::KernelTree::Load(JITD_FUZZ_MODULE_TREE_DIR);
    if (!toolchain.ok() || !tree.ok()) std::abort();
    jitd::manifest::ModuleToolchain tools;
    tools.nvcc = "/usr/local/cuda/bin/nvcc";
    tools.fingerprint = "fuzz";
    toolchain->modules = std::make_shared<const jitd::manifest::ModuleToolchainSource>(tools);
    auto r = jitd::manifest::Resolver::Create(*tree, *toolchain, "sm_90a");
    if (!r.ok()) std::abort();
    return r->release();
  }();
  return *resolver;
}

int ResolveAdhoc(const std::vector<std::string>& fields) {
  const jitd::manifest::Resolver& resolver = ModuleResolver();
  auto spec = std::make_shared<jitd::manifest::AdhocModule>();
  for (size_t i = 1; i < fields.size(); ++i) {
    const std::string& f = fields[i];
    const std::string value = f.size() > 2 ? f.substr(2) : "";
    if (f.starts_with("s:")) spec->sources.push_back(value);
    if (f.starts_with("i:")) spec->include_dirs.push_back(value);
    if (f.starts_with("o:")) spec->options.push_back(value);
    if (f.starts_with("e:")) {
      const size_t eq = value.find('=');
      spec->exports.emplace_back(value.substr(0, eq), eq == std::string::npos ? "" : value.substr(eq + 1));
    }
    if (f == "f") spec->tree_fingerprint = resolver.tree().adhoc_fingerprint();
  }
  jitd::manifest::KernelRequest request;
  request.kernel = fields[0].substr(7);
  request.module = spec;
  auto resolved = resolver.Resolve(request);
  if (!resolved.ok()) {
    if (resolved.status().message().empty()) std::abort();
    return 0;
  }
  for (const auto& file : resolved->job.headers) {
    if (resolver.tree().File(file.path) == nullptr) std::abort();  // staged a file that is not the tree's
  }
  for (const auto& [name, expression] : spec->exports) {
    if (expression.find_first_of("#;\"'()[]{}\\\n") != std::string::npos) std::abort();
  }
  return 0;
}

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
  if (fields[0].starts_with("@adhoc:")) return ResolveAdhoc(fields);
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
