// RDMA between pool blocks using nothing but their keys: a pool registered with an RDMA device
// (VerbsDomain), two RC queue pairs connected to each other (loopback, on one device), an RDMA
// WRITE from one block into another and an RDMA READ back into a third. No ibv_reg_mr in sight:
// the blocks come registered, ToSge gives the local side of a work request, and a grant
// (VerbsRemoteAccess) gives the peer access to exactly the target block, for as long as it is not
// revoked. The chunk itself stays local-only: the peer can reach nothing else.
//
// The QP set-up is support/rc_pair.h: connecting QPs is the application's
// business, not pinpool's.
//
// Without an RDMA device it says so and exits 0 (nothing to show), unless PINPOOL_REQUIRE_RDMA=1,
// when that is an error (exit 1). To run it against a real kernel RDMA provider on any Linux box:
//   scripts/softroce/run-in-guest.sh build/examples/pinpool_rdma_loopback
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "pinpool/pinpool.h"
#include "pinpool/verbs.h"
#include "pinpool/verbs_remote_access.h"
#include "rc_pair.h"

namespace {

int NoDevice(const absl::Status& why) {
  const char* required = std::getenv("PINPOOL_REQUIRE_RDMA");
  const bool must = required != nullptr && std::strcmp(required, "1") == 0;
  std::printf("rdma_loopback: no RDMA device, nothing to show: %s\n", why.ToString().c_str());
  if (must) {
    std::fprintf(stderr, "rdma_loopback: PINPOOL_REQUIRE_RDMA=1, so that is a failure\n");
    return 1;
  }
  std::printf(
      "rdma_loopback: run it where a device exists, e.g. "
      "scripts/softroce/run-in-guest.sh build/examples/pinpool_rdma_loopback\n");
  return 0;
}

int Fail(const char* what, const std::string& why) {
  std::fprintf(stderr, "rdma_loopback: %s: %s\n", what, why.c_str());
  return 1;
}

void PrintBlock(const char* name, const pinpool::Block& b) {
  std::printf("  %-8s %p  %7zu B  chunk %u  lkey 0x%x\n", name, b.data(), b.size(), b.chunk().index,
              pinpool::ToUnderlying(b.lkey()));
}

}  // namespace

int main() {
  // Local access only (the default): peers get in through grants alone.
  absl::StatusOr<std::shared_ptr<pinpool::VerbsDomain>> domain = pinpool::VerbsDomain::Open();
  if (!domain.ok()) {
    const absl::Status& s = domain.status();
    if (absl::IsNotFound(s) || absl::IsUnavailable(s) || absl::IsPermissionDenied(s)) {
      return NoDevice(s);
    }
    return Fail("opening the RDMA device", s.ToString());
  }
  std::printf("rdma_loopback: device %s, domain %s\n", (*domain)->device_name().c_str(),
              (*domain)->name().c_str());

  pinpool::PoolOptions options;
  options.chunk_size = 2 * pinpool::kMiB;
  options.budget = 8 * pinpool::kMiB;
  options.domains = {*domain};
  absl::StatusOr<std::unique_ptr<pinpool::Pool>> pool = pinpool::Pool::Create(options);
  if (!pool.ok()) return Fail("creating the pool", pool.status().ToString());

  // Both QPs on the domain's PD: the "remote" side is this process too.
  absl::StatusOr<std::unique_ptr<pinpool::testing::RcPair>> pair =
      pinpool::testing::RcPair::Connect((*domain)->pd(), (*domain)->pd());
  if (!pair.ok()) return Fail("connecting two RC QPs", pair.status().ToString());
  using Side = pinpool::testing::RcPair::Side;

  const char kMessage[] = "written by RDMA WRITE from one pinpool block into another";
  const pinpool::Block source = (*pool)->Allocate(sizeof(kMessage));
  const pinpool::Block target = (*pool)->Allocate(64 * pinpool::kKiB);
  const pinpool::Block readback = (*pool)->Allocate(sizeof(kMessage));
  if (!source || !target || !readback) {
    return Fail("allocating", (*pool)->last_growth_error().ToString());
  }
  std::printf("blocks (keys come with the block, no registration here):\n");
  PrintBlock("source", source);
  PrintBlock("target", target);
  PrintBlock("readback", readback);
  std::memcpy(source.data(), kMessage, sizeof(kMessage));
  std::memset(target.data(), 0, target.size());
  std::memset(readback.data(), 0, readback.size());

  // QP B's peer (QP A, "the server") grants it the target block, and sends it what it needs
  // over a control channel: address, rkey, length.
  absl::StatusOr<std::unique_ptr<pinpool::VerbsRemoteAccess>> access =
      pinpool::VerbsRemoteAccess::Create(**pool, (*pair)->qp(Side::kB));
  if (!access.ok()) return Fail("VerbsRemoteAccess::Create", access.status().ToString());
  (*pair)->SetCompletionHook(Side::kB, [&](const ibv_wc& c) { return (*access)->OnCompletion(c); });
  absl::StatusOr<pinpool::RemoteGrant> grant =
      (*access)->Grant(target, {.read = true, .write = true});
  if (!grant.ok()) return Fail("granting the target", grant.status().ToString());
  const pinpool::RemoteBuffer advertised = grant->remote();
  std::printf("granted (%s, range %s): address 0x%llx rkey 0x%x length %u\n",
              pinpool::GrantMechanismName(grant->mechanism),
              grant->range_enforced ? "enforced" : "NOT enforced by this device",
              static_cast<unsigned long long>(advertised.address),
              pinpool::ToUnderlying(advertised.rkey), advertised.length);

  absl::StatusOr<ibv_wc_status> wc = (*pair)->Write(Side::kA, pinpool::ToSge(source), advertised);
  if (!wc.ok()) return Fail("RDMA WRITE", wc.status().ToString());
  if (*wc != IBV_WC_SUCCESS) return Fail("RDMA WRITE completed with", ibv_wc_status_str(*wc));
  if (std::memcmp(target.data(), kMessage, sizeof(kMessage)) != 0) {
    return Fail("RDMA WRITE", "the target block does not hold the message");
  }
  std::printf("RDMA WRITE: target now says \"%s\"\n", static_cast<const char*>(target.data()));

  // And back: the peer READs the target into a third block.
  wc = (*pair)->Read(Side::kA, pinpool::ToSge(readback), advertised);
  if (!wc.ok()) return Fail("RDMA READ", wc.status().ToString());
  if (*wc != IBV_WC_SUCCESS) return Fail("RDMA READ completed with", ibv_wc_status_str(*wc));
  if (std::memcmp(readback.data(), kMessage, sizeof(kMessage)) != 0) {
    return Fail("RDMA READ", "the readback block does not hold the message");
  }
  std::printf("RDMA READ: readback block matches, byte for byte\n");

  // Freeing the target revokes the grant; the block is reused only once that has completed.
  (*pool)->Deallocate(target);
  const absl::Status revoked =
      (*pair)->PollUntil(Side::kB, [&] { return (*access)->Ended(*grant); });
  if (!revoked.ok()) return Fail("waiting for the revocation", revoked.ToString());
  std::printf("freed the target: grant revoked, the block may be reused\n");
  access->reset();
  (*pool)->Deallocate(source);
  (*pool)->Deallocate(readback);
  const pinpool::GrantStats g = (*pool)->GetStats().grants;
  std::printf(
      "rdma_loopback: OK (%llu chunk registrations for the whole run; the grant took %llu range "
      "regions, %llu window binds)\n",
      static_cast<unsigned long long>((*domain)->total_registrations()),
      static_cast<unsigned long long>(
          pinpool::FigureValue(g.figures, pinpool::VerbsGrantFigures::kRegionRegistrations)
              .value_or(0)),
      static_cast<unsigned long long>(
          pinpool::FigureValue(g.figures, pinpool::VerbsGrantFigures::kWindowBinds).value_or(0)));
  return 0;
}
