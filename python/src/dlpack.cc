// DLPack capsules (dlpack.h).
#include "dlpack.h"

#include <cstdlib>

namespace pinpool::python {

namespace {

constexpr const char* kName = "dltensor";

// The managed tensor and what its deleter needs, in one allocation.
struct Record {
  dlpack::DLManagedTensor tensor;
  std::int64_t shape[1];
  PyObject* owner;
  void (*release)(PyObject*);
};

void Delete(dlpack::DLManagedTensor* tensor) {
  Record* r = static_cast<Record*>(tensor->manager_ctx);
  // A consumer may let go on a thread without the GIL, or while the interpreter shuts down; once
  // it is finalizing, Python objects may not be touched: the record and the owner are left.
  if (_Py_IsFinalizing()) return;
  const PyGILState_STATE gil = PyGILState_Ensure();
  r->release(r->owner);
  Py_DECREF(r->owner);
  PyGILState_Release(gil);
  std::free(r);
}

// A capsule nobody consumed still carries its name: it deletes its tensor. A consumed one was
// renamed "used_dltensor", and its consumer deletes the tensor.
void CapsuleGone(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kName)) return;
  auto* tensor = static_cast<dlpack::DLManagedTensor*>(PyCapsule_GetPointer(capsule, kName));
  Delete(tensor);
}

}  // namespace

PyObject* MakeCapsule(PyObject* owner, void* data, std::int64_t bytes,
                      void (*release)(PyObject* owner)) {
  Record* r = static_cast<Record*>(std::malloc(sizeof(Record)));
  if (r == nullptr) return PyErr_NoMemory();
  r->shape[0] = bytes;
  r->owner = owner;
  r->release = release;
  r->tensor.dl_tensor = dlpack::DLTensor{
      .data = data,
      .device = {.device_type = dlpack::kDLCPU, .device_id = 0},
      .ndim = 1,
      .dtype = {.code = dlpack::kDLUInt, .bits = 8, .lanes = 1},
      .shape = r->shape,
      .strides = nullptr,
      .byte_offset = 0,
  };
  r->tensor.manager_ctx = r;
  r->tensor.deleter = Delete;
  PyObject* capsule = PyCapsule_New(&r->tensor, kName, CapsuleGone);
  if (capsule == nullptr) {
    std::free(r);
    return nullptr;
  }
  Py_INCREF(owner);
  return capsule;
}

}  // namespace pinpool::python
