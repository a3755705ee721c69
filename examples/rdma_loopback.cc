// RDMA between pool blocks using nothing but their keys: a pool registered with an RDMA device
// (VerbsDomain), two RC queue pairs connected to each other (loopback, on one device), an RDMA
// WRITE from one block into another and an RDMA READ back into a third. No ibv_reg_mr in sight:
// the blocks come registered, ToSge gives the local side of a work request and ToRemoteBuffer
// what a peer would be sent to address the block.
//
// The QP set-up is the tests' helper (tests/rdma/rc_pair.h): connecting QPs is the application's
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
  std::printf("  %-8s %p  %7zu B  chunk %u  lkey 0x%x  rkey 0x%x\n", name, b.data(), b.size(),
              b.chunk().index, pinpool::ToUnderlying(b.lkey()), pinpool::ToUnderlying(b.rkey()));
}

}  // namespace

int main() {
  // Peers may READ and WRITE this pool's memory; the default would be local access only.
  absl::StatusOr<std::shared_ptr<pinpool::VerbsDomain>> domain =
      pinpool::VerbsDomain::Open({.access = {.trusted_whole_chunk = {.read = true, .write = true}}});
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

  // What the peer would be sent over a control channel: address, rkey, length.
  const pinpool::RemoteBuffer advertised = pinpool::ToRemoteBuffer(target);
  std::printf("peer advertises: address 0x%llx rkey 0x%x length %u\n",
              static_cast<unsigned long long>(advertised.address),
              pinpool::ToUnderlying(advertised.rkey), advertised.length);

  absl::StatusOr<ibv_wc_status> wc = (*pair)->Write(Side::kA, pinpool::ToSge(source), advertised);
  if (!wc.ok()) return Fail("RDMA WRITE", wc.status().ToString());
  if (*wc != IBV_WC_SUCCESS) return Fail("RDMA WRITE completed with", ibv_wc_status_str(*wc));
  if (std::memcmp(target.data(), kMessage, sizeof(kMessage)) != 0) {
    return Fail("RDMA WRITE", "the target block does not hold the message");
  }
  std::printf("RDMA WRITE: target now says \"%s\"\n", static_cast<const char*>(target.data()));

  // And back: the other QP READs the target into a third block.
  wc = (*pair)->Read(Side::kB, pinpool::ToSge(readback), pinpool::ToRemoteBuffer(target));
  if (!wc.ok()) return Fail("RDMA READ", wc.status().ToString());
  if (*wc != IBV_WC_SUCCESS) return Fail("RDMA READ completed with", ibv_wc_status_str(*wc));
  if (std::memcmp(readback.data(), kMessage, sizeof(kMessage)) != 0) {
    return Fail("RDMA READ", "the readback block does not hold the message");
  }
  std::printf("RDMA READ: readback block matches, byte for byte\n");

  (*pool)->Deallocate(source);
  (*pool)->Deallocate(target);
  (*pool)->Deallocate(readback);
  std::printf("rdma_loopback: OK (%llu registrations for the whole run: one per chunk)\n",
              static_cast<unsigned long long>((*domain)->total_registrations()));
  return 0;
}
