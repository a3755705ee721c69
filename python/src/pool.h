// PoolState: one pinpool::Pool as the binding holds it, shared by the Python Pool object and by
// everything that needs the pool to stay alive (its blocks, arrays, remote accesses), so the C++
// pool is destroyed only once nothing in Python can reach its memory: Pool.close() (or the Pool
// object's end) drops the Pool object's share, the last block's end the last one.
//
// Invariants: `pool` is non-null until destruction; in a fork child (fork.h) the destructor leaks
// the pool instead of destroying it; after hand_over() (`handed_over`) no block of this process
// touches the memory again (freeing one does nothing: the successor owns it).
// Thread safety: every member is read and written with the GIL held; the pool's own calls may
// run with the GIL released (they are thread-safe).
#ifndef PINPOOL_PYTHON_POOL_H_
#define PINPOOL_PYTHON_POOL_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "pinpool/pool.h"

namespace pinpool::python {

namespace py = pybind11;

struct PoolState {
  explicit PoolState(std::unique_ptr<Pool> p);
  ~PoolState();
  PoolState(const PoolState&) = delete;
  PoolState& operator=(const PoolState&) = delete;

  std::unique_ptr<Pool> pool;
  std::uint64_t generation;
  bool handed_over = false;
  // Each domain's name and kind, in PoolOptions order (for Keys).
  std::vector<std::string> domain_names;
  std::vector<std::string> domain_kinds;
  std::unordered_map<std::string, ClassId> classes;  // by name, "default" included
  // Blocks claimed after an adoption, by (chunk, offset): a weak reference to the Block, so that
  // claiming a live one again returns the same object (two Blocks freeing one block would be a
  // double free).
  py::dict claimed;
};

// The Python Pool object's C++ side: its share of the state, dropped by close().
struct PoolObject {
  std::shared_ptr<PoolState> state;
  // Python domain objects, in PoolOptions order (Pool.domains).
  py::list domains;
  bool quiesced = false;

  // The state of a pool that is open and not inherited across fork (FreedError, ForkedError),
  // as a reference the caller holds for the whole call: another thread's close() meanwhile (the
  // call may release the GIL) cannot destroy the pool under it.
  std::shared_ptr<PoolState> Open(const char* what) const;
  // Drops the Pool object's reference (the C++ pool goes with the last one). Idempotent.
  void Close();
};

// The options of Pool() and Pool.adopt(), from their keyword arguments (docs/python.md, "Options";
// TypeError for an unknown one, InvalidArgumentError for a bad value). `domains` receives the
// Python domain objects.
PoolOptions OptionsFrom(const py::dict& kwargs, py::list& domains);
// A Python Pool object over a new pool.
py::object NewPoolObject(std::unique_ptr<Pool> pool, py::list domains);

using PoolClass = py::class_<PoolObject>;
void AddPool(py::module_& m);
// Pool's sharing and handover methods (sharing.cc).
void AddPoolSharing(PoolClass& cls);

}  // namespace pinpool::python

#endif  // PINPOOL_PYTHON_POOL_H_
