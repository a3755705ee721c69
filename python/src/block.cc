// The Block type (block.h) and Keys, the keys of one domain's registration as a block sees them.
#include "block.h"

#include <new>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "dlpack.h"
#include "errors.h"
#include "fork.h"
#include "pool.h"
#include "raw_call.h"
#include "sharing.h"

namespace pinpool::python {

namespace {

// One domain's keys of an address (what Location::keys and offset give), as Python sees them.
struct KeysValue {
  std::string domain;  // the domain's name ("long-term pin", "rxe0/pd0", ...)
  std::string kind;    // "host", "verbs", "io_uring", "custom"
  std::uint32_t lkey = 0;
  std::uint32_t rkey = 0;
  std::uint32_t buffer_index = 0;
  std::uint64_t base = 0;    // the registration's first address
  std::uint64_t length = 0;  // its bytes
  std::uint64_t offset = 0;  // of the address from `base`
};

// The Python helpers the typed views use (pinpool/_views.py): numpy and torch are imported there,
// when a view is first asked for.
py::object ViewsHelper(const char* name) {
  return py::module_::import("pinpool._views").attr(name);
}

bool Usable(BlockObject* b, const char* what) {
  if (!NotForked(b->generation, "block")) return false;
  if (b->state != BlockState::kLive) {
    SetFreedError(absl::StrFormat(
        "%s of a freed block: free() (or the end of its `with`) ended this Block; views made "
        "before it (arrays, tensors) still work, and keep the memory until they go",
        what));
    return false;
  }
  if (b->pool != nullptr && b->pool->handed_over) {
    SetFreedError(absl::StrFormat(
        "%s of a block of a pool handed over to its successor: this process no longer owns the "
        "memory (the successor claims the block)",
        what));
    return false;
  }
  return true;
}

// Gives an owned block's memory back to its pool (once); never raises.
void Return(BlockObject* b) {
  b->state = BlockState::kReturned;
  PoolState& pool = *b->pool;
  if (!Stale(b->generation) && !pool.handed_over) {
    if (b->granted) {
      // Its grants' revocation starts here (a region is deregistered: a system call).
      py::gil_scoped_release unlocked;
      pool.pool->Deallocate(b->data, b->size);
    } else {
      pool.pool->Deallocate(b->data, b->size);
    }
  }
  b->pool.reset();  // the last block of a closed pool destroys it (PoolState)
}

void MaybeReturn(BlockObject* b) {
  if (b->state == BlockState::kFreed && b->holds == 0 && !b->raw_exported) Return(b);
}

void Dealloc(PyObject* self) {
  auto* b = reinterpret_cast<BlockObject*>(self);
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  if (b->weakrefs != nullptr) PyObject_ClearWeakRefs(self);
  if (b->parent == nullptr) {
    if (b->state != BlockState::kReturned) Return(b);
  } else {
    b->parent_state->ViewGone();
    Py_DECREF(b->parent);
  }
  b->pool.~shared_ptr();
  PyErr_Restore(type, value, traceback);
  PyObject_Free(self);
}

PyObject* Repr(PyObject* self) {
  auto* b = reinterpret_cast<BlockObject*>(self);
  std::string where = b->parent == nullptr ? "" : " (a view)";
  if (b->state != BlockState::kLive) {
    return PyUnicode_FromString(
        absl::StrFormat("<pinpool.Block of %u bytes, freed%s>", b->size, where).c_str());
  }
  return PyUnicode_FromString(absl::StrFormat("<pinpool.Block of %u bytes at %#x%s>", b->size,
                                              reinterpret_cast<std::uintptr_t>(b->data), where)
                                  .c_str());
}

Py_ssize_t Length(PyObject* self) {
  return static_cast<Py_ssize_t>(reinterpret_cast<BlockObject*>(self)->size);
}

int GetBuffer(PyObject* self, Py_buffer* view, int flags) {
  auto* b = reinterpret_cast<BlockObject*>(self);
  if (!Usable(b, "a buffer")) return -1;
  if (PyBuffer_FillInfo(view, self, b->data, static_cast<Py_ssize_t>(b->size), 0, flags) != 0) {
    return -1;
  }
  ++b->holds;
  if ((flags & PyBUF_FORMAT) == 0) b->raw_exported = true;
  return 0;
}

void ReleaseBuffer(PyObject* self, Py_buffer*) {
  auto* b = reinterpret_cast<BlockObject*>(self);
  --b->holds;
  MaybeReturn(b);
}

void ReleaseTensor(PyObject* owner) {
  auto* b = reinterpret_cast<BlockObject*>(owner);
  --b->holds;
  MaybeReturn(b);
}

PyObject* Free(PyObject* self, PyObject*) {
  auto* b = reinterpret_cast<BlockObject*>(self);
  if (!NotForked(b->generation, "block")) return nullptr;
  if (b->parent != nullptr) {
    SetError(absl::StatusCode::kInvalidArgument,
             "this Block is a view (an array's element or run, or an attachment's block): its "
             "memory is its owner's; free the array (Array.free()), or let the owning process "
             "free the block");
    return nullptr;
  }
  if (b->state == BlockState::kLive) {
    b->state = BlockState::kFreed;
    MaybeReturn(b);
  }
  Py_RETURN_NONE;
}

PyObject* Enter(PyObject* self, PyObject*) {
  if (!Usable(reinterpret_cast<BlockObject*>(self), "`with`")) return nullptr;
  Py_INCREF(self);
  return self;
}

PyObject* Exit(PyObject* self, PyObject*) {
  auto* b = reinterpret_cast<BlockObject*>(self);
  if (b->parent != nullptr) Py_RETURN_FALSE;  // a view: the end of `with` frees nothing
  PyObject* r = Free(self, nullptr);
  if (r == nullptr) return nullptr;
  Py_DECREF(r);
  Py_RETURN_FALSE;
}

PyObject* DLPack(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"stream", "max_version", "dl_device", "copy", nullptr};
  PyObject* stream = Py_None;
  PyObject* max_version = Py_None;
  PyObject* dl_device = Py_None;
  PyObject* copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO:__dlpack__", const_cast<char**>(keywords),
                                   &stream, &max_version, &dl_device, &copy)) {
    return nullptr;
  }
  auto* b = reinterpret_cast<BlockObject*>(self);
  if (!Usable(b, "__dlpack__")) return nullptr;
  if (stream != Py_None) {
    PyErr_SetString(PyExc_BufferError, "__dlpack__: a CPU buffer takes no stream (stream=None)");
    return nullptr;
  }
  if (copy == Py_True) {
    PyErr_SetString(PyExc_BufferError,
                    "__dlpack__(copy=True): a Block shares its memory; copy it yourself "
                    "(numpy.array(block), torch.tensor(...))");
    return nullptr;
  }
  PyObject* capsule =
      MakeCapsule(self, b->data, static_cast<std::int64_t>(b->size), &ReleaseTensor);
  if (capsule != nullptr) ++b->holds;
  return capsule;
}

PyObject* DLPackDevice(PyObject*, PyObject*) { return Py_BuildValue("(ii)", dlpack::kDLCPU, 0); }

PyObject* View(PyObject* self, PyObject* args, PyObject* kwargs) {
  return Guard<PyObject*>(nullptr, [&]() -> PyObject* {
    if (!Usable(reinterpret_cast<BlockObject*>(self), "view()")) return nullptr;
    py::tuple a = py::reinterpret_borrow<py::tuple>(args);
    py::dict k = kwargs ? py::reinterpret_borrow<py::dict>(kwargs) : py::dict();
    return ViewsHelper("view")(py::handle(self), *a, **k).release().ptr();
  });
}

// numpy.asarray tries the buffer protocol first and, when it fails (a freed block), goes on to
// other protocols and would make an object array of the Block: __array__ makes it raise instead.
PyObject* Array(PyObject* self, PyObject* args) {
  return Guard<PyObject*>(nullptr, [&]() -> PyObject* {
    if (!Usable(reinterpret_cast<BlockObject*>(self), "numpy.asarray")) return nullptr;
    py::tuple a = py::reinterpret_borrow<py::tuple>(args);
    return ViewsHelper("as_numpy")(py::handle(self), *a).release().ptr();
  });
}

PyObject* Reduce(PyObject*, PyObject*) {
  PyErr_SetString(PyExc_TypeError,
                  "a Block is memory of this process and cannot be pickled: send its handle "
                  "(block.handle, a pinpool.BlockHandle) to a process attached to the pool");
  return nullptr;
}

PyMethodDef methods[] = {
    {"free", Free, METH_NOARGS,
     "free($self, /)\n--\n\nGives the block back to its pool. Every later use of this Block "
     "raises FreedError. Views made before (memoryviews, numpy arrays, tensors) stay valid: the "
     "memory goes back to the pool when the last of them goes (docs/python.md, \"Lifetimes\"). "
     "Freeing twice does nothing. Refused for a view (an array's element): free its array."},
    {"__enter__", Enter, METH_NOARGS, nullptr},
    {"__exit__", Exit, METH_VARARGS, nullptr},
    {"view", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(View)),
     METH_VARARGS | METH_KEYWORDS,
     "view($self, /, dtype='u1', shape=None, offset=0)\n--\n\nThe block's bytes from `offset` as "
     "an array of `dtype` and `shape` (an int, a tuple, or None for as many elements as fit), "
     "sharing its memory: a numpy.ndarray for a numpy dtype (or a string such as 'f4'), a "
     "torch.Tensor for a torch.dtype. The view keeps the memory allocated while it lives."},
    {"__dlpack__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(DLPack)),
     METH_VARARGS | METH_KEYWORDS,
     "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
     "A DLPack capsule over the block's bytes (uint8, one dimension, CPU): what "
     "numpy.from_dlpack and torch.from_dlpack take. The tensor made from it shares the block's "
     "memory and keeps it allocated until it is gone."},
    {"__dlpack_device__", DLPackDevice, METH_NOARGS,
     "__dlpack_device__($self, /)\n--\n\n(1, 0): host memory (kDLCPU), device 0."},
    {"__array__", Array, METH_VARARGS,
     "__array__($self, dtype=None, /)\n--\n\nThe block as a numpy array of bytes, sharing its "
     "memory (numpy.asarray(block) uses the buffer protocol and reaches this only when that "
     "fails: for a freed block, which raises FreedError)."},
    {"__reduce__", Reduce, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

// --- properties -----------------------------------------------------------------------------

template <typename F>
PyObject* Property(PyObject* self, const char* what, F&& f) {
  auto* b = reinterpret_cast<BlockObject*>(self);
  if (!Usable(b, what)) return nullptr;
  return Guard<PyObject*>(nullptr, [&]() -> PyObject* { return f(*b).release().ptr(); });
}

PyObject* GetAddress(PyObject* self, void*) {
  return Property(self, "address", [](BlockObject& b) {
    return py::int_(reinterpret_cast<std::uintptr_t>(b.data));
  });
}
PyObject* GetSize(PyObject* self, void*) {
  return PyLong_FromSize_t(reinterpret_cast<BlockObject*>(self)->size);
}
PyObject* GetFreed(PyObject* self, void*) {
  return PyBool_FromLong(reinterpret_cast<BlockObject*>(self)->state != BlockState::kLive);
}
PyObject* GetParent(PyObject* self, void*) {
  auto* b = reinterpret_cast<BlockObject*>(self);
  PyObject* p = b->parent != nullptr ? b->parent : Py_None;
  Py_INCREF(p);
  return p;
}
const PoolState* PoolOf(const BlockObject& b) {
  return b.pool != nullptr ? b.pool.get() : b.parent_state->pool_state();
}
PyObject* GetKeys(PyObject* self, void*) {
  return Property(self, "keys", [](BlockObject& b) {
    return KeysOf(PoolOf(b), b.chunk, reinterpret_cast<std::uintptr_t>(b.data));
  });
}
PyObject* GetChunk(PyObject* self, void*) {
  return Property(self, "chunk", [](BlockObject& b) -> py::object {
    if (b.chunk == nullptr) return py::none();
    return py::int_(b.chunk->index);
  });
}
PyObject* GetOffset(PyObject* self, void*) {
  return Property(self, "offset", [](BlockObject& b) -> py::object {
    if (b.chunk == nullptr || b.chunk->domain_count == 0) return py::none();
    return py::int_(reinterpret_cast<std::uintptr_t>(b.data) - b.chunk->keys[0].base);
  });
}
PyObject* GetHandle(PyObject* self, void*) {
  return Property(self, "handle", [](BlockObject& b) { return HandleOfBlock(b); });
}

PyGetSetDef getset[] = {
    {"address", GetAddress, nullptr, "The block's address in this process (an int).", nullptr},
    {"size", GetSize, nullptr, "Bytes asked for (the buffer's length).", nullptr},
    {"nbytes", GetSize, nullptr, "The same as size (as numpy and torch name it).", nullptr},
    {"freed", GetFreed, nullptr, "True once free() (or the end of its `with`) ended it.", nullptr},
    {"parent", GetParent, nullptr,
     "The Array or Attachment whose memory this view shows; None for a block of its own.", nullptr},
    {"chunk", GetChunk, nullptr,
     "The index of the chunk (one registration) the block lies in; None for an attachment's "
     "memory.",
     nullptr},
    {"offset", GetOffset, nullptr,
     "The block's offset in the registration of the pool's first domain (what an RDMA work "
     "request built from a chunk's keys needs); None without a domain.",
     nullptr},
    {"keys", GetKeys, nullptr,
     "The keys of every domain the block is registered with, in the pool's domain order: a "
     "tuple of pinpool.Keys (lkey, rkey, buffer_index, offset, ...).",
     nullptr},
    {"handle", GetHandle, nullptr,
     "The pinpool.BlockHandle naming this block in every process attached to its pool (a "
     "shared pool's block only); it pickles.",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyBufferProcs buffer_procs = {GetBuffer, ReleaseBuffer};
PySequenceMethods sequence_methods = [] {
  PySequenceMethods s{};
  s.sq_length = Length;
  return s;
}();

}  // namespace

PyTypeObject BlockType = [] {
  PyTypeObject t{};
  Py_SET_REFCNT(&t, 1);  // a static type lives forever
  t.tp_name = "pinpool.Block";
  t.tp_basicsize = sizeof(BlockObject);
  t.tp_dealloc = Dealloc;
  t.tp_repr = Repr;
  t.tp_as_sequence = &sequence_methods;
  t.tp_as_buffer = &buffer_procs;
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc =
      "Bytes of pool memory with the keys of the chunk they lie in: Pool.allocate returns one.\n\n"
      "It is a writable buffer (memoryview(block), numpy.asarray(block)) and a DLPack producer "
      "(numpy.from_dlpack(block), torch.from_dlpack(block)): each shares the block's memory, "
      "with no copy. block.view(dtype, shape) makes a typed array. Use it in a `with` statement "
      "or call free(); the memory goes back to the pool only once no view of it lives.";
  t.tp_weaklistoffset = offsetof(BlockObject, weakrefs);
  t.tp_methods = methods;
  t.tp_getset = getset;
  return t;
}();

namespace {

BlockObject* NewBlock(void* data, std::size_t size, const ChunkInfo* chunk) {
  BlockObject* b = PyObject_New(BlockObject, &BlockType);
  if (b == nullptr) return nullptr;
  b->data = data;
  b->size = size;
  b->chunk = chunk;
  new (&b->pool) std::shared_ptr<PoolState>();
  b->parent = nullptr;
  b->parent_state = nullptr;
  b->weakrefs = nullptr;
  b->generation = Generation();
  b->holds = 0;
  b->state = BlockState::kLive;
  b->raw_exported = false;
  b->granted = false;
  return b;
}

}  // namespace

PyObject* NewOwnedBlock(std::shared_ptr<PoolState> pool, const Block& block) {
  BlockObject* b = NewBlock(block.data(), block.size(), &block.chunk());
  if (b == nullptr) {
    pool->pool->Deallocate(block);
    return nullptr;
  }
  b->pool = std::move(pool);
  return reinterpret_cast<PyObject*>(b);
}

PyObject* NewView(py::handle parent, ViewParent* state, void* data, std::size_t size,
                  const ChunkInfo* chunk) {
  BlockObject* b = NewBlock(data, size, chunk);
  if (b == nullptr) return nullptr;
  b->parent = parent.inc_ref().ptr();
  b->parent_state = state;
  state->ViewAdded();
  return reinterpret_cast<PyObject*>(b);
}

BlockHold::BlockHold(BlockObject& block) noexcept : block_(block) {
  Py_INCREF(reinterpret_cast<PyObject*>(&block_));
  ++block_.holds;
}

BlockHold::~BlockHold() {
  --block_.holds;
  MaybeReturn(&block_);
  Py_DECREF(reinterpret_cast<PyObject*>(&block_));
}

BlockObject& UsableBlock(py::handle object, const char* what) {
  if (!PyObject_TypeCheck(object.ptr(), &BlockType)) {
    throw py::type_error(
        absl::StrFormat("%s: a pinpool.Block, not %s", what, Py_TYPE(object.ptr())->tp_name));
  }
  auto* b = reinterpret_cast<BlockObject*>(object.ptr());
  if (!Usable(b, what)) throw py::error_already_set();
  return *b;
}

py::tuple KeysOf(const PoolState* pool, const ChunkInfo* chunk, std::uintptr_t address) {
  if (pool == nullptr || chunk == nullptr) return py::tuple();
  py::tuple keys(chunk->domain_count);
  for (std::uint32_t d = 0; d < chunk->domain_count; ++d) {
    const Keys& k = chunk->keys[d];
    keys[d] = py::cast(KeysValue{
        .domain = d < pool->domain_names.size() ? pool->domain_names[d] : "",
        .kind = d < pool->domain_kinds.size() ? pool->domain_kinds[d] : "",
        .lkey = ToUnderlying(k.lkey),
        .rkey = ToUnderlying(k.rkey),
        .buffer_index = ToUnderlying(k.buffer_index),
        .base = k.base,
        .length = k.length,
        .offset = address - k.base,
    });
  }
  return keys;
}

void AddBlock(py::module_& m) {
  if (PyType_Ready(&BlockType) != 0) throw py::error_already_set();
  m.add_object("Block", py::handle(reinterpret_cast<PyObject*>(&BlockType)));

  py::class_<KeysValue>(m, "Keys",
                        "The keys of one domain's registration of the chunk an address lies "
                        "in, and the address's offset in it. Fields a domain's kind does not "
                        "use are 0: lkey and rkey are a verbs domain's (ibv_sge.lkey, the rkey "
                        "a peer needs), buffer_index an io_uring domain's (sqe->buf_index).")
      .def_readonly("domain", &KeysValue::domain, "The domain's name.")
      .def_readonly("kind", &KeysValue::kind, "'host', 'verbs', 'io_uring' or 'custom'.")
      .def_readonly("lkey", &KeysValue::lkey)
      .def_readonly("rkey", &KeysValue::rkey)
      .def_readonly("buffer_index", &KeysValue::buffer_index)
      .def_readonly("base", &KeysValue::base, "The registration's first address.")
      .def_readonly("length", &KeysValue::length, "The registration's bytes.")
      .def_readonly("offset", &KeysValue::offset, "The address's offset from base.")
      .def("__repr__", [](const KeysValue& k) {
        return absl::StrFormat(
            "Keys(domain='%s', kind='%s', lkey=%u, rkey=%u, buffer_index=%u, offset=%u)", k.domain,
            k.kind, k.lkey, k.rkey, k.buffer_index, k.offset);
      });
}

}  // namespace pinpool::python
