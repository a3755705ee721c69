// DLPack, the array interchange that numpy.from_dlpack and torch.from_dlpack read: the structs of
// its C ABI (the unversioned DLManagedTensor that numpy 1.24 and torch 1.13 consume), written from
// the DLPack specification, and the capsule protocol of __dlpack__.
//
// The protocol: __dlpack__() returns a PyCapsule named "dltensor" whose pointer is a
// DLManagedTensor. A consumer that takes it renames the capsule "used_dltensor" and owns the
// tensor from then on: it calls the tensor's deleter when it no longer needs the memory (from any
// thread, with or without the GIL). A capsule dropped without being consumed still has its name,
// and its destructor calls the deleter itself.
//
// What pinpool puts in: one dimension of `bytes` unsigned 8-bit elements, compact (no strides),
// on the CPU (kDLCPU, device 0), at the memory's own address (byte_offset 0); the consumer makes
// its own typed view (torch's .view(dtype), numpy's .view). The tensor holds its owner, a Python
// object, and calls `release` once on it when the consumer lets go (the owner counts its live
// tensors as views: block.h).
// Thread safety: MakeCapsule needs the GIL; the deleter takes it (and does nothing but leak its
// small record once the interpreter is finalizing).
#ifndef PINPOOL_PYTHON_DLPACK_H_
#define PINPOOL_PYTHON_DLPACK_H_

#include <Python.h>

#include <cstdint>

namespace pinpool::python {

namespace dlpack {

inline constexpr std::int32_t kDLCPU = 1;
inline constexpr std::uint8_t kDLUInt = 1;

struct DLDevice {
  std::int32_t device_type;  // a DLDeviceType (a C enum: int-sized)
  std::int32_t device_id;
};

struct DLDataType {
  std::uint8_t code;  // DLDataTypeCode: kDLInt 0, kDLUInt 1, kDLFloat 2, ...
  std::uint8_t bits;
  std::uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;  // null: compact, row-major
  std::uint64_t byte_offset;
};

struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

}  // namespace dlpack

// A "dltensor" capsule over `bytes` bytes at `data`, owned by `owner` (a new reference is kept
// until the consumer's deleter). `release(owner)` runs once, with the GIL, when the consumer lets
// go, before the reference is dropped. Null with the Python error set on failure (no memory); then
// `release` is not called.
PyObject* MakeCapsule(PyObject* owner, void* data, std::int64_t bytes,
                      void (*release)(PyObject* owner));

}  // namespace pinpool::python

#endif  // PINPOOL_PYTHON_DLPACK_H_
