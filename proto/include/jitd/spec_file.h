// Spec files: jitd.v1.KernelSpec messages written as TOML, the
// instantiations `jitctl warm --manifest FILE` and `jitd warm --manifest
// FILE` warm. The format sits beside the messages it spells, so that the
// daemon and the client share it without either depending on the other.
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

namespace jitd {

// The specs of the file at `path`, in file order. INVALID_ARGUMENT naming
// the file, line and key for a syntax error, an unknown key or a value of
// the wrong type; NOT_FOUND when the file cannot be read.
absl::StatusOr<std::vector<v1::KernelSpec>> LoadSpecFile(const std::filesystem::path& path);

}  // namespace jitd
