// A stand-in for the CUDA driver, built as libcuda.so.1 for tests on hosts
// without a GPU: the entry points jitd's client opens, with just enough
// behaviour to check what the client does with them. One device whose
// compute capability is $JITD_FAKE_CUDA_CC ("9.0" by default); contexts are
// plain objects; a "module" is the image's bytes (its size read from the ELF
// header, as the real driver does), and cuModuleGetFunction finds a name if
// the image holds it as a NUL-terminated string (a cubin's string table
// does). Extra jitd_fake_cuda_* functions let a test look inside.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

struct CUctx_st {
  unsigned long long id;
};
struct CUfunc_st {
  std::string name;
};
struct CUmod_st {
  std::string image;
  std::vector<CUfunc_st*> functions;
  CUctx_st* context;
};

namespace {

// cuda.h's values for the results this stand-in gives.
constexpr int kSuccess = 0;
constexpr int kInvalidValue = 1;
constexpr int kNotInitialized = 3;
constexpr int kInvalidImage = 200;
constexpr int kInvalidContext = 201;
constexpr int kNotFound = 500;

std::atomic<bool> initialised{false};
std::atomic<int> loads{0};
std::atomic<int> unloads{0};
std::atomic<unsigned long long> next_context_id{1};
CUctx_st primary{next_context_id++};
thread_local CUctx_st* current = nullptr;
thread_local std::vector<CUctx_st*> pushed;

// The size of an ELF64 image: its section header table comes last.
size_t ElfSize(const unsigned char* image) {
  uint64_t shoff = 0;
  uint16_t shentsize = 0, shnum = 0;
  std::memcpy(&shoff, image + 0x28, sizeof shoff);
  std::memcpy(&shentsize, image + 0x3A, sizeof shentsize);
  std::memcpy(&shnum, image + 0x3C, sizeof shnum);
  return shoff + static_cast<uint64_t>(shentsize) * shnum;
}

}  // namespace

extern "C" {

int cuInit(unsigned int flags) {
  if (flags != 0) return kInvalidValue;
  initialised = true;
  return kSuccess;
}

int cuGetErrorName(int error, const char** name) {
  switch (error) {
    case kSuccess:
      *name = "CUDA_SUCCESS";
      return kSuccess;
    case kInvalidValue:
      *name = "CUDA_ERROR_INVALID_VALUE";
      return kSuccess;
    case kNotInitialized:
      *name = "CUDA_ERROR_NOT_INITIALIZED";
      return kSuccess;
    case kInvalidImage:
      *name = "CUDA_ERROR_INVALID_IMAGE";
      return kSuccess;
    case kInvalidContext:
      *name = "CUDA_ERROR_INVALID_CONTEXT";
      return kSuccess;
    case kNotFound:
      *name = "CUDA_ERROR_NOT_FOUND";
      return kSuccess;
    default:
      return kInvalidValue;
  }
}

int cuGetErrorString(int error, const char** text) {
  switch (error) {
    case kInvalidImage:
      *text = "device kernel image is invalid";
      return kSuccess;
    case kNotFound:
      *text = "named symbol not found";
      return kSuccess;
    default:
      return cuGetErrorName(error, text);
  }
}

int cuDeviceGet(int* device, int ordinal) {
  if (!initialised) return kNotInitialized;
  if (ordinal != 0) return kInvalidValue;
  *device = 0;
  return kSuccess;
}

int cuDeviceGetAttribute(int* value, int attribute, int device) {
  if (!initialised) return kNotInitialized;
  if (device != 0) return kInvalidValue;
  const char* cc = std::getenv("JITD_FAKE_CUDA_CC");
  const std::string capability = cc != nullptr ? cc : "9.0";
  const size_t dot = capability.find('.');
  if (attribute == 75)
    *value = std::atoi(capability.substr(0, dot).c_str());
  else if (attribute == 76)
    *value = std::atoi(capability.substr(dot + 1).c_str());
  else
    return kInvalidValue;
  return kSuccess;
}

int cuDevicePrimaryCtxRetain(CUctx_st** context, int device) {
  if (!initialised) return kNotInitialized;
  if (device != 0) return kInvalidValue;
  *context = &primary;
  return kSuccess;
}

int cuCtxGetCurrent(CUctx_st** context) {
  if (!initialised) return kNotInitialized;
  *context = current;
  return kSuccess;
}

int cuCtxSetCurrent(CUctx_st* context) {
  current = context;
  return kSuccess;
}

int cuCtxGetDevice(int* device) {
  if (current == nullptr) return kInvalidContext;
  *device = 0;
  return kSuccess;
}

int cuCtxPushCurrent_v2(CUctx_st* context) {
  pushed.push_back(current);
  current = context;
  return kSuccess;
}

int cuCtxPopCurrent_v2(CUctx_st** context) {
  if (pushed.empty()) return kInvalidContext;
  *context = current;
  current = pushed.back();
  pushed.pop_back();
  return kSuccess;
}

int cuCtxGetId(CUctx_st* context, unsigned long long* id) {
  *id = context->id;
  return kSuccess;
}

int cuModuleLoadData(CUmod_st** module, const void* image) {
  if (current == nullptr) return kInvalidContext;
  const auto* bytes = static_cast<const unsigned char*>(image);
  if (std::memcmp(bytes,
                  "\x7f"
                  "ELF",
                  4) != 0 ||
      bytes[4] != 2)
    return kInvalidImage;
  *module = new CUmod_st{std::string(reinterpret_cast<const char*>(bytes), ElfSize(bytes)), {}, current};
  ++loads;
  return kSuccess;
}

int cuModuleUnload(CUmod_st* module) {
  if (current != module->context) return kInvalidContext;
  for (CUfunc_st* function : module->functions) delete function;
  delete module;
  ++unloads;
  return kSuccess;
}

int cuModuleGetFunction(CUfunc_st** function, CUmod_st* module, const char* name) {
  const std::string needle = std::string(name) + '\0';
  if (module->image.find(needle) == std::string::npos) return kNotFound;
  module->functions.push_back(new CUfunc_st{name});
  *function = module->functions.back();
  return kSuccess;
}

// --- For tests -------------------------------------------------------------
int jitd_fake_cuda_loads() { return loads; }
int jitd_fake_cuda_unloads() { return unloads; }
// A new context (as cuCtxCreate would make), not current anywhere.
CUctx_st* jitd_fake_cuda_new_context() { return new CUctx_st{next_context_id++}; }
const char* jitd_fake_cuda_function_name(CUfunc_st* function) { return function->name.c_str(); }

}  // extern "C"
