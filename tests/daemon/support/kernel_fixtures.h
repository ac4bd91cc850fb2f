// The kernels trees daemon tests serve, and the requests they make of them.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "jitd/v1/compiler.pb.h"

namespace jitd::testing {

// tests/daemon/fixtures/kernels_small: small.fill (dtype fp32|fp64) and
// small.scale (clamp off*|on), trivial (~30 ms to compile); small.broken,
// which NVRTC rejects; small.block_sum (threads 128|256|512|1024), a CUB
// kernel of about a second per instantiation, for compiles that must stay
// in flight while a test acts.
std::filesystem::path SmallKernelsDir();

// The kernels jitd ships (kernels/), where realism matters.
std::filesystem::path ShippedKernelsDir();

// tests/guard/fixtures/seed_misses: the two namespace misses of the seed.
std::filesystem::path SeedMissesDir();

// Copies a kernels tree (recursively) to `to`, for tests that edit it.
void CopyTree(const std::filesystem::path& from, const std::filesystem::path& to);

// A GetKernel request for `kernel` with `params`, the daemon's default arch.
v1::GetKernelRequest KernelRequest(const std::string& kernel, const std::map<std::string, std::string>& params = {},
                                   v1::GetKernelRequest::Mode mode = v1::GetKernelRequest::COMPILE);

// Replaces the whole content of `file`.
void WriteFile(const std::filesystem::path& file, const std::string& content);

}  // namespace jitd::testing
