/* A stand-in for the CUDA driver, for testing jitd.driver (the ctypes loader)
 * on hosts without a GPU: test_driver_fake.py compiles it with `cc -shared`
 * and points $JITD_LIBCUDA at it.
 *
 * One device of compute capability FAKE_CC_MAJOR.FAKE_CC_MINOR (settable with
 * fake_set_cc); contexts are plain objects; a module is the image (its size
 * read from the ELF header, as the driver does) and cuModuleGetFunction finds
 * a name the image holds as a NUL-terminated string (a cubin's string table
 * does); fake_set_no_binary makes the next load fail as an image for another
 * GPU would. Every function reports the parameter sizes fake_set_params set
 * (cuFuncGetParamInfo), and cuLaunchKernel records the launch and copies each
 * parameter's bytes for fake_last_* to return. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { kSuccess = 0, kInvalidValue = 1, kNotInitialized = 3, kInvalidImage = 200, kNoBinaryForGpu = 209,
       kNotFound = 500 };

typedef struct { int id; } Context;
typedef struct { char name[256]; } Function;
typedef struct { const unsigned char* image; size_t size; } Module;

static int initialised = 0;
static int cc_major = 9, cc_minor = 0;
static int no_binary = 0;
static Context primary = {1};
static __thread Context* current = NULL;
static __thread Context* stack[16];
static __thread int depth = 0;

static size_t param_sizes[64];
static size_t param_count = 0;

static struct {
  unsigned grid[3], block[3], shared;
  void* stream;
  void* function;
  unsigned char params[64][16];
  size_t count;
  int launches;
} last;

void fake_set_cc(int major, int minor) { cc_major = major; cc_minor = minor; }
void fake_set_no_binary(int on) { no_binary = on; }
void fake_set_params(const size_t* sizes, size_t count) {
  param_count = count;
  memcpy(param_sizes, sizes, count * sizeof(size_t));
}
int fake_launches(void) { return last.launches; }
void fake_last_dims(unsigned* out) {  /* grid x y z, block x y z, shared */
  memcpy(out, last.grid, sizeof last.grid);
  memcpy(out + 3, last.block, sizeof last.block);
  out[6] = last.shared;
}
void* fake_last_stream(void) { return last.stream; }
const char* fake_last_function(void) { return last.function ? ((Function*)last.function)->name : ""; }
const unsigned char* fake_last_param(size_t index) { return last.params[index]; }
void* fake_current_context(void) { return current; }

int cuInit(unsigned flags) { (void)flags; initialised = 1; return kSuccess; }

int cuGetErrorName(int error, const char** name) {
  switch (error) {
    case kSuccess: *name = "CUDA_SUCCESS"; return kSuccess;
    case kInvalidValue: *name = "CUDA_ERROR_INVALID_VALUE"; return kSuccess;
    case kNotInitialized: *name = "CUDA_ERROR_NOT_INITIALIZED"; return kSuccess;
    case kInvalidImage: *name = "CUDA_ERROR_INVALID_IMAGE"; return kSuccess;
    case kNoBinaryForGpu: *name = "CUDA_ERROR_NO_BINARY_FOR_GPU"; return kSuccess;
    case kNotFound: *name = "CUDA_ERROR_NOT_FOUND"; return kSuccess;
    default: return kInvalidValue;
  }
}

int cuGetErrorString(int error, const char** text) {
  switch (error) {
    case kNoBinaryForGpu: *text = "no kernel image is available for execution on the device"; return kSuccess;
    case kNotFound: *text = "named symbol not found"; return kSuccess;
    default: *text = "fake error"; return kSuccess;
  }
}

int cuDeviceGet(int* device, int ordinal) {
  if (!initialised) return kNotInitialized;
  if (ordinal != 0) return kInvalidValue;
  *device = 0;
  return kSuccess;
}

int cuDeviceGetAttribute(int* value, int attribute, int device) {
  (void)device;
  if (!initialised) return kNotInitialized;
  if (attribute == 75) { *value = cc_major; return kSuccess; }
  if (attribute == 76) { *value = cc_minor; return kSuccess; }
  return kInvalidValue;
}

int cuDevicePrimaryCtxRetain(Context** context, int device) {
  (void)device;
  if (!initialised) return kNotInitialized;
  *context = &primary;
  return kSuccess;
}

int cuCtxGetCurrent(Context** context) {
  if (!initialised) return kNotInitialized;
  *context = current;
  return kSuccess;
}

int cuCtxGetDevice(int* device) {
  if (!current) return 201;
  *device = 0;
  return kSuccess;
}

int cuCtxPushCurrent_v2(Context* context) {
  if (depth == 16) return kInvalidValue;
  stack[depth++] = current;
  current = context;
  return kSuccess;
}

int cuCtxPopCurrent_v2(Context** context) {
  if (depth == 0) return kInvalidValue;
  if (context) *context = current;
  current = stack[--depth];
  return kSuccess;
}

static size_t ElfSize(const unsigned char* image) {
  uint64_t shoff = 0;
  uint16_t shentsize = 0, shnum = 0;
  memcpy(&shoff, image + 0x28, sizeof shoff);
  memcpy(&shentsize, image + 0x3A, sizeof shentsize);
  memcpy(&shnum, image + 0x3C, sizeof shnum);
  return shoff + (size_t)shentsize * shnum;
}

int cuModuleLoadData(Module** module, const void* image) {
  if (!current) return 201;
  if (memcmp(image, "\x7f" "ELF", 4) != 0) return kInvalidImage;
  if (no_binary) return kNoBinaryForGpu;
  Module* loaded = malloc(sizeof *loaded);
  loaded->size = ElfSize(image);
  loaded->image = malloc(loaded->size);
  memcpy((void*)loaded->image, image, loaded->size);
  *module = loaded;
  return kSuccess;
}

int cuModuleUnload(Module* module) { (void)module; return kSuccess; }

int cuModuleGetFunction(Function** function, Module* module, const char* name) {
  size_t length = strlen(name);
  for (size_t i = 0; i + length < module->size; ++i) {
    if (memcmp(module->image + i, name, length + 1) == 0 && (i == 0 || module->image[i - 1] == 0)) {
      Function* found = calloc(1, sizeof *found);
      strncpy(found->name, name, sizeof found->name - 1);
      *function = found;
      return kSuccess;
    }
  }
  return kNotFound;
}

int cuFuncGetParamInfo(void* function, size_t index, size_t* offset, size_t* size) {
  (void)function;
  if (index >= param_count) return kInvalidValue;
  size_t at = 0;
  for (size_t i = 0; i < index; ++i) at = (at + param_sizes[i] - 1) / param_sizes[i] * param_sizes[i] + param_sizes[i];
  *offset = at;
  *size = param_sizes[index];
  return kSuccess;
}

int cuLaunchKernel(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void* stream, void** params, void** extra) {
  (void)extra;
  if (!current) return 201;
  last.function = function;
  last.grid[0] = gx; last.grid[1] = gy; last.grid[2] = gz;
  last.block[0] = bx; last.block[1] = by; last.block[2] = bz;
  last.shared = shared;
  last.stream = stream;
  last.count = param_count;
  for (size_t i = 0; i < param_count; ++i) memcpy(last.params[i], params[i], param_sizes[i]);
  ++last.launches;
  return kSuccess;
}
