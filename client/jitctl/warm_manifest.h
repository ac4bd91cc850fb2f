// The file `jitctl warm --manifest FILE` reads: the instantiations to warm.
//
//   # One table per instantiation; fields as in jitd.v1.KernelSpec.
//   [[spec]]
//   kernel = "diffusion.modulate_scale_shift"
//   params = { dtype = "bf16" }
//   arch = "sm_90"              # optional: default is --arch, then the daemon's
//   options = ["-lineinfo"]     # optional
#pragma once

#include <filesystem>
#include <vector>

#include "absl/status/statusor.h"
#include "jitd/v1/compiler.pb.h"

namespace jitd::jitctl {

// The specs of the manifest at `path`, in file order. INVALID_ARGUMENT
// naming the file, line and key for a syntax error, an unknown key or a
// value of the wrong type; NOT_FOUND when the file cannot be read.
absl::StatusOr<std::vector<v1::KernelSpec>> LoadWarmManifest(const std::filesystem::path& path);

}  // namespace jitd::jitctl
