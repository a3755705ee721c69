// pinpool.Pool: options, the allocation path, growth and trim, stats and metrics (pool.h).
// Sharing and handover are in sharing.cc, arrays in array.cc.
//
// The allocation path is a raw CPython function (METH_FASTCALL) installed on the pybind11 class:
// pybind11's generic dispatch (argument casters, overload resolution) would cost more than the
// allocation itself. It holds the GIL to parse its arguments and to make the Block, and releases
// it around Pool::Allocate, which may grow the pool (map, populate and register a chunk:
// milliseconds) or wait for a chunk another thread is adding; the release costs about 30 ns when
// no other thread wants the GIL. Freeing holds the GIL (Deallocate never grows and never waits),
// but for a block a grant was made on, whose free starts a revocation (block.cc).
#include "pool.h"

#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "array.h"
#include "block.h"
#include "domains.h"
#include "errors.h"
#include "fork.h"
#include "gil.h"
#include "raw_call.h"
#include "sizes.h"
#include "with.h"

namespace pinpool::python {

namespace {

const char* KindName(DomainKind k) { return DomainKindName(k); }

}  // namespace

PoolState::PoolState(std::unique_ptr<Pool> p) : pool(std::move(p)), generation(Generation()) {
  for (const std::shared_ptr<Domain>& d : pool->options().domains) {
    domain_names.push_back(d->name());
    domain_kinds.push_back(KindName(d->kind()));
  }
  classes.emplace("default", kDefaultClass);
  for (const BufferClass& c : pool->options().classes) {
    if (absl::StatusOr<ClassId> id = pool->ClassOf(c.name); id.ok()) classes.emplace(c.name, *id);
  }
}

PoolState::~PoolState() {
  if (Stale(generation)) {
    (void)pool.release();  // a fork child: the parent's pool is not the child's to destroy
    return;
  }
  // Destruction deregisters and unmaps every chunk: milliseconds per chunk.
  if (PyGILState_Check()) {
    py::gil_scoped_release unlocked;
    pool.reset();
  } else {
    pool.reset();
  }
}

std::shared_ptr<PoolState> PoolObject::Open(const char* what) const {
  if (state == nullptr) {
    ThrowFreed(absl::StrFormat("%s: the pool is closed", what));
  }
  CheckNotForked(state->generation, "pool");
  return state;
}

void PoolObject::Close() {
  if (state != nullptr) CheckNotForked(state->generation, "pool");
  state.reset();
}

namespace {

bool ToBool(py::handle v, const char* what) {
  if (!PyBool_Check(v.ptr())) {
    throw py::type_error(
        absl::StrFormat("%s: True or False, not %s", what, Py_TYPE(v.ptr())->tp_name));
  }
  return v.ptr() == Py_True;
}

unsigned ToUnsigned(py::handle v, const char* what) {
  const std::size_t n = ToCount(v, what);
  if (n > UINT32_MAX) {
    Throw(absl::StatusCode::kInvalidArgument, absl::StrFormat("%s: at most 2^32 - 1", what));
  }
  return static_cast<unsigned>(n);
}

PageSize ToPageSize(py::handle v) {
  if (!py::isinstance<py::str>(v)) {
    throw py::type_error("page_size: one of '1G', '2M', 'THP', '4K'");
  }
  const std::string s = absl::AsciiStrToUpper(std::string(py::str(v)));
  for (PageSize p : {PageSize::k1G, PageSize::k2M, PageSize::kTransparent, PageSize::k4K}) {
    if (s == PageSizeName(p)) return p;
  }
  Throw(absl::StatusCode::kInvalidArgument,
        absl::StrFormat("page_size '%s': one of '1G', '2M', 'THP' (transparent huge pages), '4K'",
                        std::string(py::str(v))));
}

int ToNumaNode(py::handle v) {
  if (v.is_none()) return kNoNumaNode;
  if (py::isinstance<py::str>(v) && std::string(py::str(v)) == "device") return kDeviceNumaNode;
  if (PyLong_Check(v.ptr()) && !PyBool_Check(v.ptr())) {
    const long n = PyLong_AsLong(v.ptr());
    if (n >= 0 && n < (1 << 16)) return static_cast<int>(n);
  }
  Throw(absl::StatusCode::kInvalidArgument,
        absl::StrFormat("numa_node %s: 'device' (the RDMA device's node), None (no placement) "
                        "or a node number",
                        std::string(py::repr(v))));
}

Backing ToBacking(py::handle v) {
  py::module_ os = py::module_::import("os");
  if (py::isinstance<py::str>(v)) {
    const std::string s = py::str(v);
    if (s == "anonymous") return Backing{};
    if (s == "memfd") return Backing{.kind = BackingKind::kMemfd, .directory = {}};
    if (s.find('/') == std::string::npos) {
      Throw(absl::StatusCode::kInvalidArgument,
            absl::StrFormat("backing '%s': 'anonymous', 'memfd', or a directory on tmpfs or "
                            "hugetlbfs written as a path ('/dev/shm', './chunks')",
                            s));
    }
    return Backing{.kind = BackingKind::kFiles, .directory = s};
  }
  if (py::isinstance(v, os.attr("PathLike"))) {
    return Backing{.kind = BackingKind::kFiles,
                   .directory = py::str(os.attr("fspath")(v)).cast<std::string>()};
  }
  throw py::type_error("backing: 'anonymous', 'memfd' or a directory (str or os.PathLike)");
}

}  // namespace

PoolOptions OptionsFrom(const py::dict& kwargs, py::list& domains) {
  PoolOptions o;
  for (auto [key_object, v] : kwargs) {
    const std::string key = py::str(key_object);
    const char* k = key.c_str();
    if (key == "budget") {
      o.budget = ToSize(v, k);
    } else if (key == "chunk_size") {
      o.chunk_size = ToSize(v, k);
    } else if (key == "initial_size") {
      o.initial_size = ToSize(v, k);
    } else if (key == "initial_size_in_background") {
      o.initial_size_in_background = ToBool(v, k);
    } else if (key == "page_size") {
      o.page_size = ToPageSize(v);
    } else if (key == "require_page_size") {
      o.require_page_size = ToBool(v, k);
    } else if (key == "populate") {
      o.populate = ToBool(v, k);
    } else if (key == "debug_checks") {
      o.debug_checks = ToBool(v, k);
    } else if (key == "low_watermark") {
      o.low_watermark = ToSize(v, k);
    } else if (key == "grow_in_background") {
      o.grow_in_background = ToBool(v, k);
    } else if (key == "background_workers") {
      o.background_workers = ToUnsigned(v, k);
    } else if (key == "trim_floor") {
      o.trim_floor = ToSize(v, k);
    } else if (key == "trim_interval_ms") {
      o.trim_interval_ms = ToUnsigned(v, k);
    } else if (key == "reserve_threads") {
      o.reserve_threads = ToUnsigned(v, k);
    } else if (key == "numa_node") {
      o.numa_node = ToNumaNode(v);
    } else if (key == "backing") {
      o.backing = ToBacking(v);
    } else if (key == "domains") {
      if (v.is_none()) continue;
      for (py::handle d : py::iter(v)) {
        if (!py::isinstance<DomainObject>(d)) {
          throw py::type_error(absl::StrFormat("domains: pinpool.Domain objects, not %s",
                                               Py_TYPE(d.ptr())->tp_name));
        }
        const DomainObject& domain = d.cast<const DomainObject&>();
        CheckNotForked(domain.generation, "domain");
        o.domains.push_back(domain.domain);
        domains.append(d);
      }
    } else if (key == "classes") {
      if (v.is_none()) continue;
      for (py::handle c : py::iter(v)) {
        if (!py::isinstance<BufferClass>(c)) {
          throw py::type_error(absl::StrFormat("classes: pinpool.BufferClass objects, not %s",
                                               Py_TYPE(c.ptr())->tp_name));
        }
        o.classes.push_back(c.cast<BufferClass>());
      }
    } else {
      throw py::type_error(
          absl::StrFormat("unexpected option '%s' (docs/python.md lists them)", key));
    }
  }
  return o;
}

py::object NewPoolObject(std::unique_ptr<Pool> pool, py::list domains) {
  auto object = std::make_unique<PoolObject>();
  object->state = std::make_shared<PoolState>(std::move(pool));
  object->domains = std::move(domains);
  return py::cast(std::move(object));
}

namespace {

// --- the allocation path (raw) ------------------------------------------------------------------

PoolObject* PoolOf(PyObject* self) {
  auto* instance = reinterpret_cast<py::detail::instance*>(self);
  py::detail::value_and_holder v = instance->get_value_and_holder();
  return v.holder_constructed() ? static_cast<PoolObject*>(v.value_ptr()) : nullptr;
}

// Why Allocate returned an empty Block: the error to raise (null after setting it).
PyObject* AllocationError(const PoolState& state, bool quiesced, std::size_t size,
                          std::size_t alignment, const ClassId* cls) {
  const Pool& pool = *state.pool;
  if (size > pool.max_block_size()) {
    // The largest block any pool has: 7/8 of the largest chunk, 1 GiB.
    constexpr std::size_t kLargestBlock = (std::size_t{1} << 30) / 8 * 7;
    const std::string chunk_fix =
        size <= kLargestBlock ? ", or create the pool with a larger chunk_size (up to 1GiB: its "
                                "blocks reach 7/8 of it)"
                              : " (no chunk_size makes a block that large: 1GiB chunks give "
                                "blocks of at most 896 MiB)";
    SetError(absl::StatusCode::kInvalidArgument,
             absl::StrFormat("allocate(%u): larger than the pool's largest block, %s (7/8 of its "
                             "chunk_size, %s: a block never spans two registrations); allocate "
                             "an array of pages instead (Pool.allocate_array)%s",
                             size, FormatBytes(pool.max_block_size()),
                             FormatBytes(pool.chunk_size()), chunk_fix));
    return nullptr;
  }
  if ((alignment & (alignment - 1)) != 0 || alignment > pool.chunk_size()) {
    SetError(absl::StatusCode::kInvalidArgument,
             absl::StrFormat("alignment %u: a power of two, at most the chunk size (%s)", alignment,
                             FormatBytes(pool.chunk_size())));
    return nullptr;
  }
  if (quiesced) {
    SetError(absl::StatusCode::kFailedPrecondition,
             "allocate: the pool is quiesced (warm restart): it allocates nothing more");
    return nullptr;
  }
  if (cls != nullptr) {
    if (absl::Status s = pool.class_error(*cls); !s.ok()) {
      SetError(s);
      return nullptr;
    }
  }
  if (absl::Status s = pool.last_growth_error(); !s.ok()) {
    SetError(s.code(), absl::StrFormat("allocate(%u): %s", size, s.message()));
    return nullptr;
  }
  SetError(absl::StatusCode::kResourceExhausted,
           absl::StrFormat("allocate(%u): the pool has no room for it and cannot grow (budget "
                           "%s); free blocks, or create the pool with a larger budget",
                           size, FormatBytes(pool.options().budget)));
  return nullptr;
}

PyObject* Allocate(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* size_arg = nullptr;
  PyObject* alignment_arg = nullptr;
  PyObject* cls_arg = nullptr;
  PyObject** slots[] = {&size_arg, &alignment_arg, &cls_arg};
  static const char* const names[] = {"size", "alignment", "cls"};
  if (nargs > 3) {
    PyErr_Format(PyExc_TypeError, "allocate() takes at most 3 arguments (%zd given)", nargs);
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) *slots[i] = args[i];
  if (kwnames != nullptr) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); ++i) {
      const char* name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, i));
      if (name == nullptr) return nullptr;
      int at = -1;
      for (int n = 0; n < 3; ++n) {
        if (std::strcmp(name, names[n]) == 0) at = n;
      }
      if (at < 0 || *slots[at] != nullptr) {
        PyErr_Format(PyExc_TypeError, "allocate() got %s argument '%s'",
                     at < 0 ? "an unexpected keyword" : "multiple values for", name);
        return nullptr;
      }
      *slots[at] = args[nargs + i];
    }
  }
  if (size_arg == nullptr) {
    PyErr_SetString(PyExc_TypeError, "allocate() missing its argument 'size'");
    return nullptr;
  }
  PoolObject* p = PoolOf(self);
  if (p == nullptr || p->state == nullptr) {
    SetFreedError("allocate: the pool is closed");
    return nullptr;
  }
  // A strong reference across the release of the GIL (another thread's close() cannot destroy
  // the pool under this call), which the Block then keeps: one copy either way.
  std::shared_ptr<PoolState> state = p->state;
  if (!NotForked(state->generation, "pool")) return nullptr;
  std::size_t size = 0;
  std::size_t alignment = 16;
  if (!ToSize(size_arg, "size", &size)) return nullptr;
  if (alignment_arg != nullptr && alignment_arg != Py_None &&
      !ToSize(alignment_arg, "alignment", &alignment)) {
    return nullptr;
  }
  if (size == 0) {
    SetError(absl::StatusCode::kInvalidArgument, "allocate(0): a block has at least one byte");
    return nullptr;
  }
  if (alignment == 0) {
    SetError(absl::StatusCode::kInvalidArgument, "alignment 0: a power of two");
    return nullptr;
  }
  const ClassId* cls = nullptr;
  if (cls_arg != nullptr && cls_arg != Py_None) {
    Py_ssize_t length = 0;
    const char* name =
        PyUnicode_Check(cls_arg) ? PyUnicode_AsUTF8AndSize(cls_arg, &length) : nullptr;
    if (name == nullptr) {
      if (!PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "cls: a class name (str), not %s", Py_TYPE(cls_arg)->tp_name);
      }
      return nullptr;
    }
    auto it = state->classes.find(std::string(name, length));
    if (it == state->classes.end()) {
      SetError(
          absl::StatusCode::kNotFound,
          absl::StrFormat("cls '%s': the pool has no class of that name (Pool.classes)", name));
      return nullptr;
    }
    cls = &it->second;
  }
  Block block;
  PyThreadState* unlocked = PyEval_SaveThread();
  block = cls == nullptr ? state->pool->Allocate(size, alignment)
                         : state->pool->Allocate(*cls, size, alignment);
  PyEval_RestoreThread(unlocked);
  if (!block) return AllocationError(*state, p->quiesced, size, alignment, cls);
  return NewOwnedBlock(std::move(state), block);
}

constexpr const char* kAllocateDoc =
    "allocate($self, /, size, alignment=16, cls=None)\n--\n\n"
    "A Block of `size` bytes (an int or a string such as '64KiB'), aligned to `alignment` (a "
    "power of two), from the buffer class named `cls` (None: the default class).\n\n"
    "Raises InvalidArgumentError for a size of 0, a size above max_block_size (the message "
    "names the fix: an array, or a larger chunk_size) or a bad alignment; "
    "ResourceExhaustedError (a MemoryError) when the pool cannot grow (its budget, "
    "RLIMIT_MEMLOCK, the class's cap: the message says which); TypeError for a size that is "
    "not an int or a size string. The GIL is released while the pool allocates (it may grow).";

// --- the rest of Pool --------------------------------------------------------------------------

std::chrono::nanoseconds ToTimeout(py::handle seconds) {
  if (seconds.is_none()) return std::chrono::hours(24 * 365 * 100);
  const double s = seconds.cast<double>();
  if (!(s >= 0)) {
    Throw(absl::StatusCode::kInvalidArgument, "timeout: seconds, at least 0");
  }
  return std::chrono::nanoseconds(static_cast<std::int64_t>(s * 1e9));
}

// A status as an exception object (not raised), or None.
py::object ErrorObject(const absl::Status& s) {
  if (s.ok()) return py::none();
  return py::reinterpret_borrow<py::object>(ErrorClass(s.code()))(std::string(s.message()));
}

struct Location {
  std::uintptr_t address;
  std::uint32_t chunk;
  py::tuple keys;
};

constexpr const char* kPoolDoc = R"(Pool(**options)

Registered memory, long-term pinned by default, handed out in blocks that carry their keys.

The pool maps and registers memory a whole chunk at a time with every domain, up to its budget,
and serves blocks from it with no system call and no registration. Options (all keyword; sizes
are ints or strings such as "64MiB"):

  budget="1GiB"            the most bytes the pool maps and pins
  chunk_size="64MiB"       bytes registered at a time (a power of two, 2MiB - 1GiB); the largest
                           block is 7/8 of it
  initial_size=0           bytes mapped and registered by Pool() itself
  initial_size_in_background=False  map only the first chunk now, the rest in the background
  page_size="1G"           the largest page size to try: "1G", "2M", "THP", "4K"
  require_page_size=False  fail instead of falling back to smaller pages
  populate=True            fault every page in when a chunk is mapped
  domains=None             where chunks are registered: pinpool.VerbsDomain, IoUringDomain,
                           long_term_pin_domain(), resident_domain(); None: one long-term pin
  backing="anonymous"      "anonymous", "memfd", or a directory on tmpfs/hugetlbfs (a path):
                           file-backed pools can be shared and handed over
  classes=None             named buffer classes: pinpool.BufferClass(name, reserved, cap, scrub)
  low_watermark=0, grow_in_background=True, background_workers=0   growth off the allocation path
  trim_floor=0, trim_interval_ms=0      give idle chunks back periodically
  reserve_threads=0        threads that map chunks at once (0: one per CPU of the node)
  numa_node="device"       "device", None (no placement) or a node number
  debug_checks=False       record every block and check every free exactly (slow)

Errors are typed: a bad option is an InvalidArgumentError (a ValueError), a memlock or budget
refusal a ResourceExhaustedError (a MemoryError) whose message names the limit and the fix.
Pool() releases the GIL while it maps and registers. Use it as a context manager, or close() it;
the C++ pool is destroyed once no block, array or view of it is left.)";

}  // namespace

void AddPool(py::module_& m) {
  py::class_<BufferClass>(m, "BufferClass",
                          "A named class of buffers inside one pool (docs/classes.md): a share "
                          "with `reserved` bytes no other class can take and at most `cap` "
                          "bytes (0: the budget), and when its blocks are zeroed (`scrub`: "
                          "'none', 'on_reuse', 'on_class_change'). Sizes round to whole chunks.")
      .def(py::init([](std::string name, py::object reserved, py::object cap,
                       const std::string& scrub) {
             BufferClass c{.name = std::move(name),
                           .reserved = ToSize(reserved, "reserved"),
                           .cap = ToSize(cap, "cap"),
                           .scrub = Scrub::kNone};
             for (Scrub s : {Scrub::kNone, Scrub::kOnReuse, Scrub::kOnClassChange}) {
               if (scrub == ScrubName(s)) c.scrub = s;
             }
             if (scrub != ScrubName(c.scrub)) {
               Throw(absl::StatusCode::kInvalidArgument,
                     absl::StrFormat("scrub '%s': 'none', 'on_reuse' or 'on_class_change'", scrub));
             }
             return c;
           }),
           py::arg("name"), py::arg("reserved") = 0, py::arg("cap") = 0, py::arg("scrub") = "none")
      .def_readonly("name", &BufferClass::name)
      .def_readonly("reserved", &BufferClass::reserved)
      .def_readonly("cap", &BufferClass::cap)
      .def_property_readonly("scrub", [](const BufferClass& c) { return ScrubName(c.scrub); })
      .def("__repr__", [](const BufferClass& c) {
        return absl::StrFormat("BufferClass('%s', reserved=%u, cap=%u, scrub='%s')", c.name,
                               c.reserved, c.cap, ScrubName(c.scrub));
      });

  py::class_<Location>(m, "Location",
                       "Where an address lies: its chunk and the keys of every domain there.")
      .def_readonly("address", &Location::address)
      .def_readonly("chunk", &Location::chunk)
      .def_readonly("keys", &Location::keys)
      .def("__repr__", [](const Location& l) {
        return absl::StrFormat("Location(address=%#x, chunk=%u, keys=%s)", l.address, l.chunk,
                               std::string(py::repr(l.keys)));
      });

  PoolClass cls(m, "Pool", kPoolDoc);
  cls.def(py::init([](py::kwargs kwargs) {
    py::list domains;
    PoolOptions options = OptionsFrom(kwargs, domains);
    absl::StatusOr<std::unique_ptr<Pool>> pool =
        WithoutGil([&] { return Pool::Create(std::move(options)); });
    auto object = std::make_unique<PoolObject>();
    object->state = std::make_shared<PoolState>(Take(std::move(pool)));
    object->domains = std::move(domains);
    return object;
  }));
  static PyMethodDef allocate_def = {
      "allocate", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(Allocate)),
      METH_FASTCALL | METH_KEYWORDS, kAllocateDoc};
  py::object descriptor = py::reinterpret_steal<py::object>(
      PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(cls.ptr()), &allocate_def));
  if (!descriptor) throw py::error_already_set();
  cls.attr("allocate") = descriptor;

  cls.def(
         "allocate_array",
         [](PoolObject& p, py::object count, py::object element_size, py::object alignment) {
           const std::shared_ptr<PoolState> state = p.Open("allocate_array");
           const std::size_t n = ToCount(count, "count");
           const std::size_t size = ToSize(element_size, "element_size");
           const std::size_t align = ToSize(alignment, "alignment");
           absl::StatusOr<Array> array =
               WithoutGil([&] { return state->pool->AllocateArray(n, size, align); });
           return NewArrayObject(state, Take(std::move(array)));
         },
         py::arg("count"), py::arg("element_size"), py::arg("alignment") = 1,
         "allocate_array(count, element_size, alignment=1) -> Array\n\n"
         "`count` equal elements that may span many chunks, no element straddling one "
         "(docs/arrays.md): a KV cache's pages, a receive ring. Maps and registers chunks as "
         "needed (the GIL is released). InvalidArgumentError for a count or size of 0, an "
         "element larger than a chunk, a bad alignment; ResourceExhaustedError past the budget.")
      .def(
          "reserve",
          [](PoolObject& p, py::object bytes) {
            const std::shared_ptr<PoolState> state = p.Open("reserve");
            const std::size_t n = ToSize(bytes, "bytes");
            Check(WithoutGil([&] { return state->pool->Reserve(n); }));
          },
          py::arg("bytes"),
          "reserve(bytes)\n\nMaps and registers chunks until at least `bytes` are mapped "
          "(several at once); the GIL is released. ResourceExhaustedError past the budget, "
          "RLIMIT_MEMLOCK or the memory cgroup, naming the fix.")
      .def(
          "replenish",
          [](PoolObject& p, py::object max_chunks) {
            const std::shared_ptr<PoolState> state = p.Open("replenish");
            const std::size_t n =
                max_chunks.is_none() ? SIZE_MAX : ToCount(max_chunks, "max_chunks");
            Check(WithoutGil([&] { return state->pool->Replenish(n); }));
          },
          py::arg("max_chunks") = py::none(),
          "replenish(max_chunks=None)\n\nAdds chunks until the low watermark is met (for an "
          "application that keeps it from its own loop); the GIL is released.")
      .def_property_readonly(
          "needs_replenish",
          [](PoolObject& p) { return p.Open("needs_replenish")->pool->NeedsReplenish(); },
          "True when the room left is below the low watermark and the budget allows more.")
      .def(
          "trim",
          [](PoolObject& p, py::object floor) {
            const std::shared_ptr<PoolState> state = p.Open("trim");
            const std::size_t bytes = ToSize(floor, "floor");
            py::gil_scoped_release unlocked;
            return state->pool->Trim(bytes);
          },
          py::arg("floor") = 0,
          "trim(floor=0) -> int\n\nGives whole idle chunks back (deregistered, unmapped) while "
          "more than `floor` bytes stay mapped; returns the bytes given back. The GIL is "
          "released.")
      .def_property_readonly(
          "ready", [](PoolObject& p) { return p.Open("ready")->pool->Ready(); },
          "Whether all of initial_size is mapped (see initial_size_in_background).")
      .def(
          "await_initial_size",
          [](PoolObject& p, py::object timeout) {
            const std::shared_ptr<PoolState> state = p.Open("await_initial_size");
            const std::chrono::nanoseconds t = ToTimeout(timeout);
            Check(WithoutGil([&] { return state->pool->AwaitInitialSize(t); }));
          },
          py::arg("timeout") = py::none(),
          "await_initial_size(timeout=None)\n\nWaits (GIL released) until all of initial_size "
          "is mapped; DeadlineExceededError after `timeout` seconds, or the start-up's error.")
      .def_property_readonly(
          "last_growth_error",
          [](PoolObject& p) {
            return ErrorObject(p.Open("last_growth_error")->pool->last_growth_error());
          },
          "Why the last growth failed, as an exception object (not raised), or None.")
      .def(
          "class_error",
          [](PoolObject& p, const std::string& name) {
            const std::shared_ptr<PoolState> state = p.Open("class_error");
            auto it = state->classes.find(name);
            if (it == state->classes.end()) {
              Throw(absl::StatusCode::kNotFound,
                    absl::StrFormat("class '%s': the pool has no class of that name", name));
            }
            return ErrorObject(state->pool->class_error(it->second));
          },
          py::arg("name"),
          "class_error(name) -> PinpoolError | None\n\nWhy the class's last allocation that "
          "needed a chunk failed (its cap, other classes' reservations), or None.")
      .def_property_readonly(
          "classes",
          [](PoolObject& p) {
            py::list names;
            names.append("default");
            for (const BufferClass& c : p.Open("classes")->pool->options().classes) {
              names.append(c.name);
            }
            return names;
          },
          "The names of the pool's buffer classes, 'default' first.")
      .def(
          "stats",
          [](PoolObject& p) {
            const std::shared_ptr<PoolState> state = p.Open("stats");
            const std::string json = WithoutGil([&] { return state->pool->GetStats().ToJson(); });
            return py::module_::import("json").attr("loads")(json);
          },
          "stats() -> dict\n\nA snapshot of the pool's figures, with the names of its JSON "
          "(PoolStats::ToJson; docs/pinpool-info.md lists them): live_bytes, mapped_bytes, "
          "pinned_bytes, domains, chunks, grants, growth, sharing, ... The GIL is released "
          "while it is taken.")
      .def(
          "metrics",
          [](PoolObject& p) {
            const std::shared_ptr<PoolState> state = p.Open("metrics");
            py::gil_scoped_release unlocked;
            return state->pool->GetStats().ToOpenMetrics();
          },
          "metrics() -> str\n\nEvery figure in the OpenMetrics text format Prometheus scrapes "
          "(docs/metrics.md), for an endpoint of your own; its Content-Type is "
          "pinpool.OPENMETRICS_CONTENT_TYPE.")
      .def(
          "serve_metrics",
          [](PoolObject& p, py::object path) {
            const std::shared_ptr<PoolState> state = p.Open("serve_metrics");
            const std::string where =
                py::str(py::module_::import("os").attr("fspath")(path)).cast<std::string>();
            Check(WithoutGil([&] { return state->pool->ServeMetrics(where); }));
          },
          py::arg("path"),
          "serve_metrics(path)\n\nServes metrics() on a Unix socket at `path` (mode 0600) for "
          "`pinpool-info --metrics PATH`, from the pool's own thread.")
      .def(
          "stop_serving_metrics",
          [](PoolObject& p) { p.Open("stop_serving_metrics")->pool->StopServingMetrics(); },
          "stop_serving_metrics()\n\nStops serving metrics (removes the socket).")
      .def(
          "lookup",
          [](PoolObject& p, std::uintptr_t address) -> py::object {
            const std::shared_ptr<PoolState> state = p.Open("lookup");
            std::optional<pinpool::Location> at =
                state->pool->Lookup(reinterpret_cast<const void*>(address));
            if (!at) return py::none();
            return py::cast(
                Location{address, at->chunk().index, KeysOf(state.get(), &at->chunk(), address)});
          },
          py::arg("address"),
          "lookup(address) -> Location | None\n\nThe chunk and keys of any address inside the "
          "pool's chunks (an interior pointer of a block, say); None outside them.")
      .def(
          "contains",
          [](PoolObject& p, std::uintptr_t address) {
            return p.Open("contains")->pool->Contains(reinterpret_cast<const void*>(address));
          },
          py::arg("address"), "contains(address) -> bool")
      .def_property_readonly("chunk_size",
                             [](PoolObject& p) { return p.Open("chunk_size")->pool->chunk_size(); })
      .def_property_readonly(
          "max_block_size",
          [](PoolObject& p) { return p.Open("max_block_size")->pool->max_block_size(); },
          "The largest size allocate() serves: 7/8 of chunk_size.")
      .def_property_readonly("budget",
                             [](PoolObject& p) { return p.Open("budget")->pool->options().budget; })
      .def_property_readonly(
          "id",
          [](PoolObject& p) {
            const PoolId& id = p.Open("id")->pool->id();
            return py::bytes(reinterpret_cast<const char*>(id.data()), id.size());
          },
          "The pool's identity: 16 random bytes, kept across handovers.")
      .def_property_readonly(
          "domains", [](PoolObject& p) { return p.domains; },
          "The Domain objects the pool registers with, in order (empty: the default long-term "
          "pin).")
      .def_property_readonly("closed", [](PoolObject& p) { return p.state == nullptr; })
      .def("close", &PoolObject::Close,
           "close()\n\nEnds the Pool object's use of the pool: every later call raises "
           "FreedError. The C++ pool (its chunks, registrations and pins) is destroyed at once "
           "when no block, array or remote access of it is left, else when the last goes. "
           "Closing twice does nothing.")
      .def("__repr__", [](PoolObject& p) {
        if (p.state == nullptr) return std::string("<pinpool.Pool, closed>");
        if (Stale(p.state->generation)) return std::string("<pinpool.Pool of the parent process>");
        const Pool& pool = *p.state->pool;
        return absl::StrFormat("<pinpool.Pool of %s chunks, budget %s>",
                               FormatBytes(pool.chunk_size()), FormatBytes(pool.options().budget));
      });
  WithStatement(
      cls, [](PoolObject& p) { p.Open("with"); }, [](PoolObject& p) { p.Close(); });
  AddPoolSharing(cls);
  m.attr("OPENMETRICS_CONTENT_TYPE") = std::string(kOpenMetricsContentType);
}

}  // namespace pinpool::python
