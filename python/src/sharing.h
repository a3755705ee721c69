// Sharing from Python (docs/sharing.md, docs/python.md "Sharing"): pinpool.BlockHandle (a block
// named the same way in every process that maps the pool; it pickles), pinpool.Attachment (another
// process's view of a shared pool: its blocks as Block views), and Pool's share, handle_of,
// quiesce, hand_over, adopt and claim. Every call that can wait (receiving, sending, quiescing,
// adopting, claiming) releases the GIL.
// Thread safety: with the GIL held, as the rest of the binding.
#ifndef PINPOOL_PYTHON_SHARING_H_
#define PINPOOL_PYTHON_SHARING_H_

#include <pybind11/pybind11.h>

#include "block.h"

namespace pinpool::python {

namespace py = pybind11;

// The BlockHandle of `block` (a block of a pool, or an element of its array).
py::object HandleOfBlock(const BlockObject& block);

void AddSharing(py::module_& m);

}  // namespace pinpool::python

#endif  // PINPOOL_PYTHON_SHARING_H_
