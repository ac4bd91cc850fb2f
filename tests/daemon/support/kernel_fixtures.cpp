#include "kernel_fixtures.h"

#include <fstream>
#include <stdexcept>

namespace jitd::testing {

std::filesystem::path SmallKernelsDir() { return std::filesystem::path(JITD_DAEMON_FIXTURES) / "kernels_small"; }

std::filesystem::path ShippedKernelsDir() { return JITD_SHIPPED_KERNELS_DIR; }

std::filesystem::path SeedMissesDir() { return std::filesystem::path(JITD_GUARD_FIXTURES) / "seed_misses"; }

void CopyTree(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::filesystem::copy(from, to, std::filesystem::copy_options::recursive);
}

v1::GetKernelRequest KernelRequest(const std::string& kernel, const std::map<std::string, std::string>& params,
                                   v1::GetKernelRequest::Mode mode) {
  v1::GetKernelRequest request;
  request.set_kernel(kernel);
  request.mutable_params()->insert(params.begin(), params.end());
  request.set_mode(mode);
  return request;
}

void WriteFile(const std::filesystem::path& file, const std::string& content) {
  std::ofstream stream(file, std::ios::trunc);
  stream << content;
  if (!stream) throw std::runtime_error("cannot write " + file.string());
}

}  // namespace jitd::testing
