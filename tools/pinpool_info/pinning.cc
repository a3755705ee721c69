// What each of pinpool's domains does to a chunk's pages, and whether it can be used here: the
// default (long-term pin through private io_uring tables), io_uring, verbs (both long-term pins)
// and mlock (resident, not pinned). From the facts only; the words for "why not" are the
// library's (the default domain's own error, domain/io_uring_refusal.h).
#include <cerrno>
#include <string>
#include <vector>

#include "domain/io_uring_refusal.h"
#include "info.h"

namespace pinpool::info {

std::vector<DomainPinning> DescribeDomains(const Facts& f) {
  std::vector<DomainPinning> out;

  DomainPinning pin;
  pin.domain = "default";
  pin.pinning = Pinning::kLongTerm;
  pin.how =
      "MakeLongTermPinDomain(), for pools that name no domain: io_uring fixed buffers in "
      "tables private to the domain";
  pin.available = f.long_term_pin.available;
  pin.unavailable = f.long_term_pin.error;
  out.push_back(pin);

  DomainPinning ring;
  ring.domain = "io_uring";
  ring.pinning = Pinning::kLongTerm;
  ring.how = "IoUringDomain: fixed buffers of your ring (READ_FIXED / WRITE_FIXED)";
  const IoUringFacts& u = f.io_uring;
  ring.available = u.available && u.sparse_buffers.value_or(false);
  if (!u.available) {
    ring.unavailable =
        internal::ExplainIoUringSetupFailure(u.error_errno.value_or(0), u.disabled_sysctl)
            .Message();
  } else if (!ring.available) {
    ring.unavailable =
        internal::ExplainSparseTableFailure(u.sparse_errno.value_or(EINVAL), 1).Message();
  }
  out.push_back(ring);

  DomainPinning verbs;
  verbs.domain = "verbs";
  verbs.pinning = Pinning::kLongTerm;
  verbs.how = "VerbsDomain: ibv_reg_mr (with on-demand paging: not pinned)";
  for (const DeviceInfo& d : f.rdma.devices) {
    for (const PortInfo& p : d.ports) verbs.available = verbs.available || p.active;
  }
  if (!verbs.available) {
    verbs.unavailable = "no RDMA device with an ACTIVE port (the RDMA problems below say why)";
  }
  out.push_back(verbs);

  DomainPinning mlock;
  mlock.domain = "mlock";
  mlock.pinning = Pinning::kResident;
  mlock.how = "MakeResidentNotPinnedDomain(): mlock(2), only if chosen";
  mlock.available = true;
  out.push_back(mlock);
  return out;
}

}  // namespace pinpool::info
