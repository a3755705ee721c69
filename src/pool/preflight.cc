// Pool::Create's preflight (preflight.h has the contract).
#include "pool/preflight.h"

#include "absl/strings/str_format.h"
#include "domain/memlock.h"
#include "util/bytes.h"

namespace pinpool::internal {
namespace {

bool HugetlbRequired(const PoolOptions& o) {
  return o.require_page_size && (o.page_size == PageSize::k1G || o.page_size == PageSize::k2M);
}

absl::Status Prefixed(const absl::Status& s, const PoolOptions& o) {
  if (s.ok()) return s;
  return absl::Status(
      s.code(), absl::StrFormat("Pool::Create maps and pins PoolOptions::initial_size (%s, %s in "
                                "chunks of %s) before it returns, and refused before pinning "
                                "anything: %s",
                                FormatBytes(o.initial_size), FormatBytes(InitialBytes(o)),
                                FormatBytes(o.chunk_size), s.message()));
}

}  // namespace

std::size_t InitialBytes(const PoolOptions& o) {
  return (o.initial_size + o.chunk_size - 1) / o.chunk_size * o.chunk_size;
}

PinDemand DemandFor(const PoolOptions& o, std::size_t bytes) {
  std::size_t long_term = 0;
  bool resident = false;
  if (o.domains.empty()) {
    long_term = 1;  // MakeLongTermPinDomain()
  } else {
    for (const auto& d : o.domains) {
      long_term += d->pinning() == Pinning::kLongTerm ? 1 : 0;
      resident = resident || d->pinning() == Pinning::kResident;
    }
  }
  PinDemand demand;
  demand.pin = bytes * long_term;
  demand.lock = resident ? bytes : 0;
  const bool faulted_in = o.populate || long_term != 0 || resident;
  demand.charge = faulted_in && !HugetlbRequired(o) ? bytes : 0;
  return demand;
}

absl::Status PreflightCeilings(const PoolOptions& o, const os::MemlockState& memlock,
                               const os::MemoryCgroupState& cgroup) {
  const PinDemand d = DemandFor(o, InitialBytes(o));
  if (d.pin == 0 && d.lock == 0 && d.charge == 0) return absl::OkStatus();
  if (absl::Status s = CheckMemlockHeadroom(d.pin, d.lock, memlock, "PoolOptions::initial_size");
      !s.ok()) {
    return Prefixed(s, o);
  }
  return Prefixed(CheckCgroupHeadroom(d.charge, cgroup, "PoolOptions::initial_size"), o);
}

absl::Status PreflightHugePages(const PoolOptions& o, int node) {
  if (!HugetlbRequired(o) || InitialBytes(o) == 0) return absl::OkStatus();
  return Prefixed(os::CheckHugePagesAvailable(o.page_size, InitialBytes(o), node), o);
}

}  // namespace pinpool::internal
