// Host-side checks of the TensorView arguments every launcher takes.
//
// An exported function is called from Python with whatever the caller has in
// hand, and a kernel reads raw pointers: a wrong dtype, shape, device or a
// strided view would silently read the wrong bytes. So every launcher checks
// each argument before it touches data_ptr(), and the error names the
// function, the argument and what was expected, e.g.
//   silu_and_mul: `out` must have shape [4, 128], got [4, 256]
// The errors are TVM_FFI_THROW(...) and reach Python as the exception type
// named (ValueError, TypeError).
#pragma once

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/dtype.h>
#include <tvm/ffi/error.h>

#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <string>

#include "common/dtype.cuh"

namespace sglang {

inline std::string shape_string(const int64_t* dims, size_t ndim) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < ndim; ++i) os << (i ? ", " : "") << dims[i];
  os << ']';
  return os.str();
}

// What every tensor argument must be: a contiguous CUDA tensor of element type
// T (one lane) with `ndim` dimensions. Returns nothing; throws on a mismatch.
template <typename T>
void check_tensor(const char* op, const char* name, const tvm::ffi::TensorView& t, int32_t ndim) {
  const DLDataType dtype = t.dtype();
  if (dtype.code != DTypeInfo<T>::kCode || dtype.bits != DTypeInfo<T>::kBits || dtype.lanes != 1) {
    TVM_FFI_THROW(TypeError) << op << ": `" << name << "` must be " << DTypeInfo<T>::kName << " (this export was built "
                             << "for it), got " << tvm::ffi::DLDataTypeToString(dtype);
  }
  if (t.device().device_type != kDLCUDA) {
    TVM_FFI_THROW(ValueError) << op << ": `" << name << "` must be a CUDA tensor, got device type "
                              << static_cast<int>(t.device().device_type);
  }
  if (t.ndim() != ndim) {
    TVM_FFI_THROW(ValueError) << op << ": `" << name << "` must have " << ndim << " dimensions, got " << t.ndim()
                              << " (shape " << shape_string(t.shape().data(), t.shape().size()) << ")";
  }
  // The kernels index rows as r * dim: a strided view (a slice, a transpose)
  // would be read as if it were dense.
  if (!t.IsContiguous()) {
    TVM_FFI_THROW(ValueError) << op << ": `" << name << "` must be contiguous";
  }
}

// `t`'s shape must be exactly `expected` (its ndim was checked already).
inline void check_shape(const char* op, const char* name, const tvm::ffi::TensorView& t,
                        std::initializer_list<int64_t> expected) {
  const tvm::ffi::ShapeView shape = t.shape();
  bool same = shape.size() == expected.size();
  for (size_t i = 0; same && i < shape.size(); ++i) same = shape[i] == expected.begin()[i];
  if (!same) {
    TVM_FFI_THROW(ValueError) << op << ": `" << name << "` must have shape "
                              << shape_string(expected.begin(), expected.size()) << ", got "
                              << shape_string(shape.data(), shape.size());
  }
}

// All tensors of one call live on the device of the first (`ref`): the kernel
// runs there, on that device's current stream.
inline void check_same_device(const char* op, const char* name, const tvm::ffi::TensorView& t, const char* ref_name,
                              const tvm::ffi::TensorView& ref) {
  if (t.device().device_id != ref.device().device_id) {
    TVM_FFI_THROW(ValueError) << op << ": `" << name << "` is on cuda:" << t.device().device_id << " but `" << ref_name
                              << "` on cuda:" << ref.device().device_id;
  }
}

// The first element of `t` as T*. DLPack keeps the offset of a view apart
// from its base pointer, so it is added here rather than ignored.
template <typename T>
T* data_of(const tvm::ffi::TensorView& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data_ptr()) + t.byte_offset());
}

}  // namespace sglang
