// The C++ GPU test's side of tests/gpu/crosscheck.py: with JITD_GPU_DUMP_DIR
// set, the diffusion cases write their inputs and jitd's output there, and
// crosscheck.py runs the same inputs through CuPy (the same cubin, loaded a
// second way) and eager PyTorch, and compares bit for bit.
//
// Per case, in the directory:
//   <name>.inputs  the input tensors' raw 16-bit values, back to back, in the
//                  kernel's argument order (x, scale, shift / residual,
//                  update, gate)
//   <name>.output  the output's raw 16-bit values
//   <name>.json    {"name", "kernel", "dtype", "gate" (residual_gate_add
//                  only), "input_shapes": [[...], ...]}, as crosscheck.py
//                  reads it. Nothing else in the directory ends in .json.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace jitd::gpu {

struct DumpCase {
  // Every member has an initializer, so designated initializers may leave
  // `gate` out.
  std::string name{};                 // file stem: "modulate_scale_shift_bf16_1x17x64"
  std::string kernel{};               // "diffusion.modulate_scale_shift"
  std::string dtype{};                // "bf16" | "fp16"
  std::optional<std::string> gate{};  // "full" | "broadcast", residual_gate_add only
  std::vector<std::vector<std::int64_t>> input_shapes{};
  // Raw 16-bit values, one span per input (in argument order), and the output.
  std::vector<std::span<const std::uint16_t>> inputs{};
  std::span<const std::uint16_t> output{};
};

// $JITD_GPU_DUMP_DIR, or nothing when unset or empty.
std::optional<std::filesystem::path> DumpDir();

// Writes the three files of `c` into `dir` (created if missing). Checks that
// each input holds as many values as its shape says.
absl::Status WriteDump(const std::filesystem::path& dir, const DumpCase& c);

}  // namespace jitd::gpu
