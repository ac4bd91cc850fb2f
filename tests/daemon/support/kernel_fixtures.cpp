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

std::string BlobKernelSource(const std::string& ns, const std::string& kernel, size_t chunk_bytes, size_t chunks,
                             uint64_t first_seed) {
  const std::string chunk_size = std::to_string(chunk_bytes);
  std::string src = "namespace " + ns +
                    " {\n"
                    "struct Chunk { unsigned char v[" +
                    chunk_size +
                    "]; };\n"
                    "__host__ __device__ constexpr Chunk MakeChunk(unsigned long long s) {\n"
                    "  Chunk c{};\n"
                    "  for (unsigned i = 0; i < sizeof(c.v); ++i) {\n"
                    "    s = s * 6364136223846793005ULL + 1442695040888963407ULL;\n"
                    "    c.v[i] = static_cast<unsigned char>(s >> 56);\n"
                    "  }\n  return c;\n}\n";
  std::string table;
  for (size_t i = 0; i < chunks; ++i) {
    src +=
        "__device__ const Chunk kChunk" + std::to_string(i) + " = MakeChunk(" + std::to_string(first_seed + i) + ");\n";
    table += "kChunk" + std::to_string(i) + ".v, ";
  }
  return src + "__global__ void " + kernel + "(char* out, unsigned i) {\n  const unsigned char* chunks[] = {" + table +
         "};\n  out[0] = static_cast<char>(chunks[i / " + chunk_size + "][i % " + chunk_size +
         "]);\n}\n}  // namespace " + ns + "\n";
}

void WriteFile(const std::filesystem::path& file, const std::string& content) {
  std::ofstream stream(file, std::ios::trunc);
  stream << content;
  if (!stream) throw std::runtime_error("cannot write " + file.string());
}

}  // namespace jitd::testing
