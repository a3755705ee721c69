// pinpool.Array (array.h).
#include "array.h"

#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "errors.h"
#include "fork.h"
#include "pinpool/descriptor.h"
#include "pool.h"
#include "sizes.h"
#include "with.h"

namespace pinpool::python {

ArrayObject::ArrayObject(std::shared_ptr<PoolState> pool, Array array)
    : pool_(std::move(pool)), array_(std::move(array)), generation_(Generation()) {}

ArrayObject::~ArrayObject() {
  if (state_ != State::kReturned) Return();
}

void ArrayObject::ViewGone() noexcept {
  --views_;
  if (state_ == State::kFreed && views_ == 0) Return();
}

const Array& ArrayObject::Usable(const char* what) const {
  CheckNotForked(generation_, "array");
  if (state_ != State::kLive) {
    ThrowFreed(
        absl::StrFormat("%s of a freed array: views made before (elements, runs, numpy "
                        "arrays, tensors) still work, and keep the memory until they go",
                        what));
  }
  if (pool_->handed_over) {
    ThrowFreed(absl::StrFormat("%s of an array of a pool handed over to its successor", what));
  }
  return array_;
}

void ArrayObject::Free() {
  CheckNotForked(generation_, "array");
  if (state_ != State::kLive) return;
  state_ = State::kFreed;
  if (views_ == 0) Return();
}

void ArrayObject::Return() noexcept {
  state_ = State::kReturned;
  if (!Stale(generation_) && !pool_->handed_over) {
    // Its runs' grants are revoked on the way (range regions are deregistered: system calls).
    py::gil_scoped_release unlocked;
    pool_->pool->Deallocate(std::move(array_));
  }
  pool_.reset();
}

py::object NewArrayObject(std::shared_ptr<PoolState> pool, Array array) {
  return py::cast(std::make_unique<ArrayObject>(std::move(pool), std::move(array)));
}

namespace {

struct RunValue {
  std::size_t index;
  std::uintptr_t address;
  std::uint32_t chunk;
  std::size_t first;
  std::size_t count;
  std::size_t nbytes;  // count x stride
  py::tuple keys;
};

std::size_t Index(const Array& a, py::handle i) {
  if (PyBool_Check(i.ptr()) || !PyIndex_Check(i.ptr())) {
    throw py::type_error(
        absl::StrFormat("array indices are ints, not %s", Py_TYPE(i.ptr())->tp_name));
  }
  const Py_ssize_t n = PyNumber_AsSsize_t(i.ptr(), PyExc_IndexError);
  if (n == -1 && PyErr_Occurred()) throw py::error_already_set();
  const Py_ssize_t size = static_cast<Py_ssize_t>(a.size());
  const Py_ssize_t at = n < 0 ? n + size : n;
  if (at < 0 || at >= size) {
    throw py::index_error(absl::StrFormat("element %d of an array of %u", n, a.size()));
  }
  return static_cast<std::size_t>(at);
}

py::object Element(py::object self, py::handle i) {
  ArrayObject& a = self.cast<ArrayObject&>();
  const Array& array = a.Usable("an element");
  const Block e = array.Element(Index(array, i));
  PyObject* view = NewView(self, &a, e.data(), e.size(), &e.chunk());
  if (view == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(view);
}

std::size_t RunIndex(const Array& array, std::size_t r) {
  if (r >= array.runs().size()) {
    throw py::index_error(absl::StrFormat("run %u of an array of %u runs", r, array.runs().size()));
  }
  return r;
}

}  // namespace

void AddArray(py::module_& m) {
  py::class_<RunValue>(m, "Run",
                       "The elements of an array that lie in one chunk (one registration): "
                       "address of its first element, the chunk, the first element's index, "
                       "how many, their bytes (count x stride) and the chunk's keys.")
      .def_readonly("index", &RunValue::index)
      .def_readonly("address", &RunValue::address)
      .def_readonly("chunk", &RunValue::chunk)
      .def_readonly("first", &RunValue::first)
      .def_readonly("count", &RunValue::count)
      .def_readonly("nbytes", &RunValue::nbytes)
      .def_readonly("keys", &RunValue::keys)
      .def("__repr__", [](const RunValue& r) {
        return absl::StrFormat("Run(index=%u, address=%#x, chunk=%u, first=%u, count=%u)", r.index,
                               r.address, r.chunk, r.first, r.count);
      });

  py::class_<ArrayObject> array_class(
      m, "Array",
      "`count` equal elements allocated and freed as one object that may "
      "span many chunks, no element straddling one (Pool.allocate_array; "
      "docs/arrays.md). array[i] is element i as a Block view (its address, "
      "keys, buffer and DLPack); run_view(r) a numpy view of the elements "
      "of one chunk; describe() the compact descriptor a peer decodes. Free "
      "it with free() or a `with` statement: the memory goes back once no "
      "view of it lives.");
  array_class.def("__len__", [](const ArrayObject& a) { return a.Usable("len()").size(); })
      .def_property_readonly(
          "count", [](const ArrayObject& a) { return a.Usable("count").size(); }, "Elements.")
      .def_property_readonly(
          "element_size",
          [](const ArrayObject& a) { return a.Usable("element_size").element_size(); })
      .def_property_readonly(
          "stride", [](const ArrayObject& a) { return a.Usable("stride").stride(); },
          "Bytes from one element's start to the next one's in the same run.")
      .def_property_readonly(
          "elements_per_chunk",
          [](const ArrayObject& a) { return a.Usable("elements_per_chunk").elements_per_chunk(); })
      .def_property_readonly(
          "in_block", [](const ArrayObject& a) { return a.Usable("in_block").in_block(); },
          "True when the array is one heap block (small arrays), False when it holds chunks.")
      .def_property_readonly("freed", &ArrayObject::freed)
      .def("__getitem__", &Element, py::arg("index"))
      .def("element", &Element, py::arg("index"),
           "element(index) -> Block\n\nElement `index` (negative counts from the end) as a Block "
           "view: its address, size, keys and offset per domain, buffer and DLPack. It keeps "
           "the array's memory while it lives; IndexError out of range.")
      .def_property_readonly(
          "runs",
          [](const ArrayObject& a) {
            const Array& array = a.Usable("runs");
            py::list runs;
            for (std::size_t r = 0; r < array.runs().size(); ++r) {
              const ArrayRun& run = array.runs()[r];
              const auto address = reinterpret_cast<std::uintptr_t>(run.base);
              runs.append(RunValue{r, address, run.chunk->index, run.first, run.count,
                                   run.count * array.stride(),
                                   KeysOf(a.pool_state(), run.chunk, address)});
            }
            return runs;
          },
          "The runs (pinpool.Run), one per chunk the array spans, in element order.")
      .def(
          "run",
          [](py::object self, std::size_t r) {
            ArrayObject& a = self.cast<ArrayObject&>();
            const Array& array = a.Usable("run()");
            const Block run = array.Run(RunIndex(array, r));
            PyObject* view = NewView(self, &a, run.data(), run.size(), &run.chunk());
            if (view == nullptr) throw py::error_already_set();
            return py::reinterpret_steal<py::object>(view);
          },
          py::arg("r"),
          "run(r) -> Block\n\nRun `r`'s bytes (count x stride, inside one chunk) as a Block "
          "view: what a grant of the whole run covers.")
      .def(
          "run_view",
          [](py::object self, std::size_t r, py::object dtype) {
            self.cast<ArrayObject&>().Usable("run_view()");
            return py::module_::import("pinpool._views").attr("run_view")(self, r, dtype);
          },
          py::arg("r"), py::arg("dtype") = "u1",
          "run_view(r, dtype='u1') -> numpy.ndarray\n\nRun `r`'s elements as a numpy array of "
          "shape (count, element_size // itemsize), row i element first + i, sharing the "
          "memory (rows are `stride` bytes apart).")
      .def(
          "describe",
          [](const ArrayObject& a, std::vector<std::size_t> domains, std::size_t first,
             py::object count) {
            const Array& array = a.Usable("describe()");
            const std::uint64_t n = count.is_none() ? UINT64_MAX : ToCount(count, "count");
            std::vector<std::byte> bytes = Take(Describe(array, domains, first, n));
            return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
          },
          py::arg("domains") = std::vector<std::size_t>{0}, py::arg("first") = 0,
          py::arg("count") = py::none(),
          "describe(domains=[0], first=0, count=None) -> bytes\n\nThe compact descriptor of "
          "elements [first, first + count), renumbered from 0, with the rkeys their chunks have "
          "in the pool's domains `domains` (by index): what a peer decodes with "
          "pinpool.Descriptor. A chunk's rkey opens the whole chunk: for trusted peers only; "
          "grant the array instead (RemoteAccess.grant_array, describe_grants).")
      .def("free", &ArrayObject::Free,
           "free()\n\nGives the array back to its pool once no view of it lives (elements, "
           "runs and what was made from them). Every later use raises FreedError. Runs a grant "
           "can still reach are held until the grant is revoked.")
      .def("__repr__", [](const ArrayObject& a) {
        if (a.freed()) return std::string("<pinpool.Array, freed>");
        const Array& array = a.Usable("repr");
        return absl::StrFormat("<pinpool.Array of %u elements of %u bytes in %u runs>",
                               array.size(), array.element_size(), array.runs().size());
      });
  WithStatement(
      array_class, [](ArrayObject& a) { a.Usable("with"); }, [](ArrayObject& a) { a.Free(); });
}

}  // namespace pinpool::python
