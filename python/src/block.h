// Block: the Python object over bytes of pool memory, with the buffer protocol (memoryview,
// numpy), DLPack (numpy.from_dlpack, torch.from_dlpack) and the keys of the chunk it lies in.
// A raw CPython type, not a pybind11 class: its buffer protocol needs a release hook (pybind11's
// has none), and allocating one is the Python allocation path (docs/python.md, "Speed").
//
// Two kinds:
//  - owned (Pool.allocate, Pool.claim): the block is the object's; free(), the end of its `with`
//    or the object's own end gives it back;
//  - a view (Array elements and runs, an Attachment's blocks): the memory is its parent's (an
//    Array, an Attachment), which the view keeps alive, and which keeps its memory while any view
//    lives (ViewParent); free() of a view is refused.
//
// The lifetime rule: memory goes back to the pool only once nothing in Python can reach it.
// `holds` counts the buffer exports (memoryview, numpy arrays) and DLPack tensors alive; each
// holds a reference to the Block, so the Block outlives them. free() ends the object's own use
// (every later use raises FreedError) and gives the block back at once when holds is 0; otherwise
// the last export or tensor to go gives it back. A consumer that asks for raw bytes (a buffer
// request without a format: torch.frombuffer, socket.send, file.write, hashlib) may keep the
// address after giving the buffer back (torch.frombuffer does, keeping a reference to the Block
// instead), so after such a request the block goes back only with the Block object itself.
// Thread safety: every field is read and written with the GIL held; the DLPack deleter takes it.
#ifndef PINPOOL_PYTHON_BLOCK_H_
#define PINPOOL_PYTHON_BLOCK_H_

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "pinpool/block.h"
#include "pinpool/keys.h"

namespace pinpool::python {

namespace py = pybind11;

struct PoolState;

// What a view's memory belongs to: it keeps that memory while any view of it lives. The view
// holds a strong reference to the parent's Python object, so the parent outlives its views.
// Called with the GIL.
class ViewParent {
 public:
  virtual void ViewAdded() noexcept = 0;
  virtual void ViewGone() noexcept = 0;
  // The pool whose keys the views show (null: no keys, an attachment's memory).
  virtual const PoolState* pool_state() const noexcept = 0;

 protected:
  ~ViewParent() = default;
};

enum class BlockState : std::uint8_t {
  kLive,      // usable
  kFreed,     // free() called; the memory is kept for views still alive
  kReturned,  // given back to the pool (owned blocks only)
};

struct BlockObject {
  PyObject ob_base;  // PyObject_HEAD
  void* data;
  std::size_t size;
  const ChunkInfo* chunk;           // keys; null for an attachment's memory
  std::shared_ptr<PoolState> pool;  // an owned block's pool (empty for a view)
  PyObject* parent;                 // a view's parent (strong reference); null when owned
  ViewParent* parent_state;         // the parent's C++ side
  PyObject* weakrefs;
  std::uint64_t generation;  // fork.h
  std::uint32_t holds;       // buffer exports and DLPack tensors alive
  BlockState state;
  bool raw_exported;  // a buffer was requested without a format
  bool granted;       // a grant was made on it: its free may revoke (GIL released)
};

extern PyTypeObject BlockType;

// Holds a Block's memory for the length of a call that uses it with the GIL released (a grant):
// another thread's free() meanwhile leaves the memory to the hold's end, as it would to a view.
class BlockHold {
 public:
  explicit BlockHold(BlockObject& block) noexcept;
  ~BlockHold();
  BlockHold(const BlockHold&) = delete;
  BlockHold& operator=(const BlockHold&) = delete;

 private:
  BlockObject& block_;
};

// The same for a parent's memory (an Array's, an Attachment's mappings): counted as a view.
class ViewHold {
 public:
  explicit ViewHold(ViewParent& parent) noexcept : parent_(parent) { parent_.ViewAdded(); }
  ~ViewHold() { parent_.ViewGone(); }
  ViewHold(const ViewHold&) = delete;
  ViewHold& operator=(const ViewHold&) = delete;

 private:
  ViewParent& parent_;
};

void AddBlock(py::module_& m);

// A new owned Block (a new reference), or null with the Python error set. The block must be
// non-empty.
PyObject* NewOwnedBlock(std::shared_ptr<PoolState> pool, const Block& block);
// A new view of `size` bytes at `data` (keys from `chunk`, which may be null).
PyObject* NewView(py::handle parent, ViewParent* state, void* data, std::size_t size,
                  const ChunkInfo* chunk);

// `object` as a Block that can still be used (TypeError, FreedError or ForkedError otherwise).
BlockObject& UsableBlock(py::handle object, const char* what);
// The tuple of Keys of `address` in `chunk`, one per domain of `pool`.
py::tuple KeysOf(const PoolState* pool, const ChunkInfo* chunk, std::uintptr_t address);

}  // namespace pinpool::python

#endif  // PINPOOL_PYTHON_BLOCK_H_
