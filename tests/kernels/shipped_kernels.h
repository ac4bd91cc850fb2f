// The kernels directory these tests hold to KERNELS.md, read through the
// production path: jitd_manifest's KernelTree and Resolver, as the daemon
// reads them.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <memory>

#include "absl/status/statusor.h"
#include "manifest/manifest.h"

namespace jitd::kernels_test {

// $JITD_TEST_KERNELS_DIR if set (to check an installed share/jitd/kernels),
// else the source tree's kernels/ (JITD_KERNELS_DIR, set by the build).
inline std::filesystem::path ShippedKernelsDir() {
  const char* dir = std::getenv("JITD_TEST_KERNELS_DIR");
  return dir != nullptr && *dir != '\0' ? std::filesystem::path(dir) : std::filesystem::path(JITD_KERNELS_DIR);
}

// The tree, read in place (no snapshot): cheap, so discovery may call it.
inline absl::StatusOr<std::shared_ptr<const manifest::KernelTree>> LoadShippedKernels() {
  return manifest::KernelTree::Load(ShippedKernelsDir());
}

// The resolver the daemon would build over the shipped kernels, default arch
// sm_90 (the H200). Made once per process: Toolchain::Detect fingerprints
// the toolkit headers (about 30 MB read).
inline absl::StatusOr<const manifest::Resolver*> ShippedResolver() {
  static const absl::StatusOr<std::unique_ptr<manifest::Resolver>> resolver =
      []() -> absl::StatusOr<std::unique_ptr<manifest::Resolver>> {
    auto tree = LoadShippedKernels();
    if (!tree.ok()) return tree.status();
    auto toolchain = manifest::Toolchain::Detect();
    if (!toolchain.ok()) return toolchain.status();
    return manifest::Resolver::Create(*std::move(tree), *std::move(toolchain), "sm_90");
  }();
  if (!resolver.ok()) return resolver.status();
  return resolver->get();
}

}  // namespace jitd::kernels_test
