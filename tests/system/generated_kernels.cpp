#include "generated_kernels.h"

#include <fstream>

namespace jitd::testing {

std::string ManyValue(int n) {
  std::string value = "v";  // (GCC 12 warns falsely about "v" + to_string)
  value += std::to_string(n);
  return value;
}

void WriteManyKernelsTree(const std::filesystem::path& dir, int values) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "many.cu") << "namespace sglang::many {\n"
                                    "template <int N> __global__ void fill(int* out) { out[threadIdx.x] = N; }\n"
                                    "}  // namespace sglang::many\n";
  std::string list;
  for (int n = 0; n < values; ++n) {
    if (n > 0) list += ", ";
    list += ManyValue(n) + " = \"" + std::to_string(n) + "\"";
  }
  std::ofstream(dir / "kernels.toml") << "schema = 1\n[defaults]\noptions = [\"-std=c++17\"]\n"
                                         "[[kernel]]\nname = \"many.fill\"\nsource = \"many.cu\"\n"
                                         "description = \"one instantiation per value of n\"\n"
                                         "name_expressions = [\"sglang::many::fill<{n}>\"]\n"
                                         "  [[kernel.params]]\n  name = \"n\"\n  type = \"enum\"\n  values = { "
                                      << list << " }\n";
}

const std::vector<std::string>& ManyArchs() {
  static const std::vector<std::string> archs = {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"};
  return archs;
}

v1::GetKernelRequest ManyRequest(int n, const std::string& arch, v1::GetKernelRequest::Mode mode) {
  v1::GetKernelRequest request;
  request.set_kernel("many.fill");
  (*request.mutable_params())["n"] = ManyValue(n);
  request.set_arch(arch);
  request.set_mode(mode);
  return request;
}

}  // namespace jitd::testing
