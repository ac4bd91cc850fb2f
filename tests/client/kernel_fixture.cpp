#include "kernel_fixture.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "test_daemon.h"

namespace jitd::testing {

void WriteFixtureKernels(const std::filesystem::path& dir, const std::string& variant) {
  std::filesystem::create_directories(dir / "test");
  std::ofstream(dir / "kernels.toml") << R"toml(schema = 1

[defaults]
options = ["-std=c++17"]

[[kernel]]
name = "test.scale"
source = "test/scale.cu"
description = "out = in * factor"
name_expressions = ["sglang::test::scale_kernel<{dtype}>"]
options = []
  [[kernel.params]]
  name = "dtype"
  type = "dtype"
  values = { fp32 = "float", fp64 = "double" }
)toml";
  std::ofstream(dir / "test" / "scale.cu") << "// variant: " << variant << R"cu(
namespace sglang::test {
template <typename T>
__global__ void scale_kernel(T* out, const T* in, T factor, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * factor;
}
}  // namespace sglang::test
)cu";
  if (!std::filesystem::exists(dir / "test" / "scale.cu")) throw std::runtime_error("cannot write " + dir.string());
}

ProcessResult RunJitdWarm(const std::filesystem::path& kernels, const std::filesystem::path& cache,
                          const std::vector<std::string>& args, const std::filesystem::path& log) {
  std::vector<std::string> argv = {JitdBinary(), "warm", "--cache-dir", cache.string(), "--kernels", kernels.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, log, std::chrono::seconds(120));
}

std::string FakeCubin(const std::vector<std::string>& names) {
  constexpr size_t kHeader = 64;
  constexpr size_t kSectionHeader = 64;
  std::string strings(1, '\0');
  for (const std::string& name : names) strings += name + '\0';
  std::string image(kHeader, '\0');
  std::memcpy(image.data(),
              "\x7f"
              "ELF",
              4);
  image[4] = 2;                  // ELFCLASS64
  image[5] = 1;                  // little endian
  image[6] = 1;                  // EV_CURRENT
  const uint16_t machine = 190;  // EM_CUDA
  std::memcpy(image.data() + 0x12, &machine, sizeof machine);
  const uint64_t shoff = kHeader + strings.size();
  const uint16_t shentsize = kSectionHeader;
  const uint16_t shnum = 1;
  std::memcpy(image.data() + 0x28, &shoff, sizeof shoff);
  std::memcpy(image.data() + 0x3A, &shentsize, sizeof shentsize);
  std::memcpy(image.data() + 0x3C, &shnum, sizeof shnum);
  return image + strings + std::string(kSectionHeader, '\0');
}

}  // namespace jitd::testing
