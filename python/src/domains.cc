// Domains from Python (domains.h).
#include "domains.h"

#include <liburing.h>

#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "errors.h"
#include "fork.h"
#include "gil.h"
#include "pinpool/io_uring.h"
#include "pinpool/verbs.h"
#include "sizes.h"

namespace pinpool::python {

DomainObject::DomainObject(std::shared_ptr<Domain> d)
    : domain(std::move(d)), generation(Generation()) {}

DomainObject::~DomainObject() {
  if (Stale(generation)) new std::shared_ptr<Domain>(std::move(domain));  // leaked on purpose
}

namespace {

template <typename T>
T& Usable(DomainObject& d) {
  CheckNotForked(d.generation, "domain");
  return static_cast<T&>(*d.domain);
}

RemoteRights ToRights(py::handle v, const char* what) {
  RemoteRights r;
  if (v.is_none()) return r;
  if (py::isinstance<py::str>(v)) {
    throw py::type_error(absl::StrFormat("%s: a set of rights such as {'read', 'write'}", what));
  }
  for (py::handle item : py::iter(v)) {
    const std::string right = py::str(item);
    if (right == "read") {
      r.read = true;
    } else if (right == "write") {
      r.write = true;
    } else if (right == "atomic") {
      r.atomic = true;
    } else {
      Throw(absl::StatusCode::kInvalidArgument,
            absl::StrFormat("%s: '%s' is not a right ('read', 'write', 'atomic')", what, right));
    }
  }
  return r;
}

}  // namespace

void AddDomains(py::module_& m) {
  py::class_<DomainObject>(m, "Domain",
                           "Where a pool's chunks are registered (Pool(domains=[...])): an RDMA "
                           "protection domain, an io_uring buffer table, or host memory pinned "
                           "or locked without a device. Make one with VerbsDomain(), "
                           "IoUringDomain(), long_term_pin_domain() or resident_domain().")
      .def_property_readonly("name", [](DomainObject& d) { return Usable<Domain>(d).name(); })
      .def_property_readonly(
          "kind", [](DomainObject& d) { return DomainKindName(Usable<Domain>(d).kind()); },
          "'host', 'verbs', 'io_uring' or 'custom'.")
      .def_property_readonly(
          "pinning", [](DomainObject& d) { return PinningName(Usable<Domain>(d).pinning()); },
          "What registration does to the pages: 'long-term' (physical addresses fixed), "
          "'resident' (mlock: may move; not for DMA) or 'none'.")
      .def("__repr__", [](DomainObject& d) {
        if (Stale(d.generation)) return std::string("<pinpool.Domain of the parent process>");
        return absl::StrFormat("<pinpool.Domain '%s' (%s, %s)>", d.domain->name(),
                               DomainKindName(d.domain->kind()), PinningName(d.domain->pinning()));
      });

  m.def(
      "long_term_pin_domain",
      []() {
        absl::StatusOr<std::shared_ptr<Domain>> d =
            WithoutGil([&] { return MakeLongTermPinDomain(); });
        return std::make_unique<DomainObject>(Take(std::move(d)));
      },
      "long_term_pin_domain() -> Domain\n\nLong-term pinned host memory (what a pool without "
      "domains uses): physical addresses fixed, counted in VmPin, no device and no keys. "
      "PermissionDeniedError or UnimplementedError, naming the cause, where io_uring cannot "
      "pin.");
  m.def(
      "resident_domain",
      []() { return std::make_unique<DomainObject>(MakeResidentNotPinnedDomain()); },
      "resident_domain() -> Domain\n\nResident, NOT pinned (mlock): the pages stay in memory but "
      "may move; not for DMA. Counted in VmLck.");

  py::class_<VerbsDomainObject, DomainObject>(
      m, "VerbsDomain",
      "VerbsDomain(device='', *, local_write=True, trusted_whole_chunk=None, on_demand=False)\n\n"
      "An RDMA protection domain of a device (its verbs name, such as 'rxe0' or 'mlx5_0'; '' "
      "for the first with an active port): each chunk becomes one memory region, local access "
      "only unless `trusted_whole_chunk` names rights ({'read', 'write', 'atomic'}) that every "
      "chunk's rkey then opens to any peer that learns it (trusted peers only: grant blocks "
      "instead, RemoteAccess). NotFoundError without a device, PermissionDeniedError without "
      "access to /dev/infiniband.")
      .def(py::init(
               [](const std::string& device, bool local_write, py::object trusted, bool on_demand) {
                 VerbsOptions options{.device = device,
                                      .access = VerbsAccess{.local_write = local_write,
                                                            .trusted_whole_chunk = ToRights(
                                                                trusted, "trusted_whole_chunk"),
                                                            .on_demand = on_demand}};
                 absl::StatusOr<std::shared_ptr<VerbsDomain>> d =
                     WithoutGil([&] { return VerbsDomain::Open(options); });
                 return std::make_unique<VerbsDomainObject>(Take(std::move(d)));
               }),
           py::arg("device") = "", py::kw_only(), py::arg("local_write") = true,
           py::arg("trusted_whole_chunk") = py::none(), py::arg("on_demand") = false)
      .def_property_readonly(
          "device_name", [](VerbsDomainObject& d) { return Usable<VerbsDomain>(d).device_name(); })
      .def_property_readonly(
          "max_mr_size", [](VerbsDomainObject& d) { return Usable<VerbsDomain>(d).max_mr_size(); })
      .def_property_readonly(
          "live_registrations",
          [](VerbsDomainObject& d) { return Usable<VerbsDomain>(d).live_registrations(); },
          "Memory regions registered through this domain now.")
      .def_property_readonly(
          "windows",
          [](VerbsDomainObject& d) {
            const WindowSupport& w = Usable<VerbsDomain>(d).windows();
            py::dict out;
            out["type2"] = w.type2;
            out["bounds_enforced"] = w.bounds_enforced;
            out["reason"] = w.reason;
            return out;
          },
          "The device's type 2 memory windows as grants use them: {'type2', "
          "'bounds_enforced', 'reason'}.");

  py::class_<IoUringDomainObject, DomainObject>(
      m, "IoUringDomain",
      "IoUringDomain(entries=64, *, first_slot=0, slots=1024)\n\nAn io_uring fixed-buffer "
      "table: each chunk is one fixed buffer of a ring the domain creates, in slots [first_slot, "
      "first_slot + slots), and block.keys[d].buffer_index is the index for sqe->buf_index "
      "(READ_FIXED, WRITE_FIXED) on that ring (ring_fd). PermissionDeniedError or "
      "UnimplementedError where io_uring cannot be used, naming the cause.")
      .def(py::init([](py::object entries, py::object first_slot, py::object slots) {
             const IoUringDomainOptions options{
                 .first_slot = static_cast<std::uint32_t>(ToCount(first_slot, "first_slot")),
                 .slots = static_cast<std::uint32_t>(ToCount(slots, "slots")),
                 .register_table = true};
             const auto n = static_cast<unsigned>(ToCount(entries, "entries"));
             absl::StatusOr<std::shared_ptr<IoUringDomain>> d =
                 WithoutGil([&] { return IoUringDomain::Create(n, options); });
             return std::make_unique<IoUringDomainObject>(Take(std::move(d)));
           }),
           py::arg("entries") = 64, py::kw_only(), py::arg("first_slot") = 0,
           py::arg("slots") = 1024)
      .def_property_readonly(
          "ring_fd",
          [](IoUringDomainObject& d) { return Usable<IoUringDomain>(d).ring()->ring_fd; },
          "The ring's descriptor (the ring the buffer indexes belong to).")
      .def_property_readonly(
          "slots_in_use",
          [](IoUringDomainObject& d) { return Usable<IoUringDomain>(d).slots_in_use(); },
          "Slots holding a chunk now.");
}

}  // namespace pinpool::python
