// WithStatement: `with` for a bound class whose objects end with a call of their own (close(),
// free()): __enter__ checks the object is still usable (raising as its other calls do) and
// returns it, __exit__ ends it and lets any exception through.
// Thread safety: with the GIL held, as every bound call.
#ifndef PINPOOL_PYTHON_WITH_H_
#define PINPOOL_PYTHON_WITH_H_

#include <pybind11/pybind11.h>

namespace pinpool::python {

template <typename T, typename Check, typename End>
void WithStatement(pybind11::class_<T>& cls, Check check, End end) {
  cls.def("__enter__",
          [check](pybind11::object self) {
            check(self.cast<T&>());
            return self;
          })
      .def("__exit__", [end](T& object, pybind11::args) {
        end(object);
        return false;
      });
}

}  // namespace pinpool::python

#endif  // PINPOOL_PYTHON_WITH_H_
