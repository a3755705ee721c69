// io_uring fixed-buffer domain: registers each chunk as one fixed buffer of a set of rings (a
// server's ring per thread or per core), so blocks can be read and written with
// IORING_OP_READ_FIXED / WRITE_FIXED (and sent with SEND_ZC: pinpool/io_uring_zero_copy.h) on any
// of them, with no per-I/O page pinning.
//
// Slots: every ring has a sparse buffer table (registered once), and each chunk takes one slot,
// THE SAME SLOT IN EVERY RING the domain serves, so growth never re-registers what is already
// there and a block has one BufferIndex (Block::buffer_index(d)) to put in sqe->buf_index on any
// of the rings; the block's own address is the address to read or write. A chunk's slot is
// emptied in every ring when the pool lets the chunk go (trim, destruction).
//
// Rings: the domain's own ring (Create makes it, Wrap takes the application's) holds the
// registration of every chunk. Other rings join with AddRing and leave with RemoveRing, at any
// time while pools use the domain; a ring that joins gets every chunk registered so far, and
// every chunk registered later.
//
// One pin (sharing()): where the kernel can clone a range of one ring's table into another
// (IORING_REGISTER_CLONE_BUFFERS with offsets, Linux 6.13), the other rings get clones of the
// domain's ring's slots: the pages are pinned and charged against RLIMIT_MEMLOCK once, whatever
// the number of rings, and a ring joins in microseconds. Where it cannot (Linux 6.12 clones only
// whole tables into rings that have none, which a ring serving I/O cannot be brought back to; 6.1
// has no cloning), each ring registers every chunk itself: each registration pins the pages
// again and is charged again (VmPin and RLIMIT_MEMLOCK grow with every ring), and a joining ring
// pins the whole pool. The domain's figures say which (IoUringDomainFigures), with the bytes
// charged; pinpool-info says what N rings cost on a machine. docs/io_uring.md has the details.
//
// Registration takes a long-term pin (Pinning::kLongTerm): the pages cannot migrate while
// registered, they count in VmPin, and io_uring checks them against RLIMIT_MEMLOCK per user,
// across all of the user's processes. Linux 6.1 drops the pin of an emptied slot about a second
// later, from a kernel worker; destroying the domain, and RemoveRing of a ring whose table pinpool
// registered, wait for all of them. (The default domain, MakeLongTermPinDomain, pins the same way
// with rings of its own when a pool needs the pin but no I/O.)
//
// pinpool keeps a duplicate of each ring's descriptor: its calls always reach that ring, even if
// the application closed its descriptor and the number went to another file. A ring the
// application closes without RemoveRing ("closed under the pool") is noticed at the next
// registration, membership change or figures() call: its slots are emptied, the duplicate is
// closed (so the kernel can tear the ring down and drop its pins), it counts in kRingsClosed,
// and RemoveRing of it says what happened.
//
// Thread safety: every method may be called from any thread, and Register/Deregister from
// several threads and pools at once; one lock per domain serializes the slots and the rings. The
// rings themselves are the application's to submit on; pinpool only registers buffers on them.
#ifndef PINPOOL_IO_URING_H_
#define PINPOOL_IO_URING_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pinpool/abi.h"
#include "pinpool/domain.h"
#include "pinpool/export.h"

struct io_uring;  // liburing's ring

namespace pinpool {
PINPOOL_ABI_BEGIN

struct IoUringDomainOptions {
  // Slots pinpool may use: [first_slot, first_slot + slots), in the domain's ring and in every
  // ring that joins. Each chunk of each pool using the domain takes one.
  std::uint32_t first_slot = 0;
  std::uint32_t slots = 1024;
  // True: pinpool registers a sparse table of first_slot + slots entries on the domain's ring
  // (which must have no buffer table yet). False: the application already registered a sparse
  // table that covers those slots, and pinpool only updates them.
  bool register_table = true;
  // Share each chunk's registration with the other rings by cloning it, where the kernel can.
  // False: every ring registers every chunk itself (sharing() is kPerRing), as on kernels that
  // cannot clone; for comparisons and benchmarks.
  bool clone = true;
};

// What AddRing does to the ring's buffer table.
struct IoUringRingOptions {
  // True: pinpool registers a sparse table of first_slot + slots entries on the ring (which must
  // have none) and unregisters it when the ring leaves. False: the application registered a
  // sparse table covering the domain's slots; pinpool fills and empties only those. On kernels
  // whose range clones drop the destination's later entries (see KernelCanClone), the
  // application's table is refused: its slots after the domain's would be lost.
  bool register_table = true;
};

// How a chunk's registration reaches the rings other than the domain's own.
enum class IoUringSharing : std::uint8_t {
  kClone,    // cloned from the domain's ring: pinned and charged once, whatever the rings
  kPerRing,  // registered in each ring: pinned and charged once per ring
};

// What this kernel can clone (IORING_REGISTER_CLONE_BUFFERS), probed once per process.
struct IoUringCloneSupport {
  bool whole_table = false;  // a whole table, into a ring that has none (Linux 6.12)
  bool ranges = false;       // a range, into a ring that has a table (6.13): what kClone needs
  // A range clone keeps the destination's entries after the range (fixed in December 2025;
  // kernels from 6.13 until the fix drop them).
  bool keeps_later_entries = false;
};

// Names of the figures an IoUringDomain reports (Domain::figures; docs/metrics.md).
struct IoUringDomainFigures {
  static constexpr std::string_view kRings = "io_uring_rings";      // rings served now
  static constexpr std::string_view kCloning = "io_uring_cloning";  // 1: kClone, 0: kPerRing
  // Clone calls made (a ring joining, a chunk shared with a ring), ever.
  static constexpr std::string_view kClones = "io_uring_clones";
  // Chunks registered in a ring other than the domain's own (kPerRing: joins and growth), ever.
  static constexpr std::string_view kRingRegistrations = "io_uring_ring_registrations";
  // Bytes the domain's registrations charge against RLIMIT_MEMLOCK (and count in VmPin): the
  // registered bytes once with kClone, once per ring with kPerRing.
  static constexpr std::string_view kMemlockBytes = "io_uring_memlock_bytes";
  // Rings found closed by the application while the domain served them, ever.
  static constexpr std::string_view kRingsClosed = "io_uring_rings_closed";
  // Zero-copy sends on the domain's rings waiting for their notification
  // (pinpool/io_uring_zero_copy.h).
  static constexpr std::string_view kZeroCopyInFlight = "io_uring_zc_in_flight";
};

class PINPOOL_EXPORT IoUringDomain : public Domain {
 public:
  // The kernel's limits on fixed buffers: one buffer (one chunk) is at most 1 GiB, and one ring's
  // table holds at most 16384 of them (IORING_MAX_REG_BUFFERS).
  static constexpr std::size_t kMaxBufferBytes = std::size_t{1} << 30;
  static constexpr std::uint32_t kMaxBuffers = 16384;

  // A ring created and owned by the domain, with `entries` submission entries. Errors when io_uring
  // cannot be used here name the cause and the fix: kPermissionDenied (kernel.io_uring_disabled,
  // a seccomp filter), kUnimplemented (no io_uring, or no sparse tables: before Linux 5.19),
  // kResourceExhausted (memory, descriptors).
  static absl::StatusOr<std::shared_ptr<IoUringDomain>> Create(unsigned entries,
                                                               IoUringDomainOptions options = {});
  // The application's ring; it must outlive the domain and every pool using it.
  static absl::StatusOr<std::shared_ptr<IoUringDomain>> Wrap(io_uring* ring,
                                                             IoUringDomainOptions options = {});

  // What this kernel can clone.
  static IoUringCloneSupport KernelCanClone();

  // The domain's own ring, to submit I/O on.
  virtual io_uring* ring() const noexcept = 0;
  // Slots holding a chunk right now.
  virtual std::uint32_t slots_in_use() const = 0;

  // The application's ring `ring` joins: when this returns OK, every chunk registered so far is
  // in its table, at the same slot as in every other ring, and every chunk registered later will
  // be. The ring must stay open until RemoveRing (or the domain's end). Errors, after which
  // nothing of the domain is in the ring and nothing more is pinned:
  //  - kInvalidArgument: a null ring, or no open descriptor in it;
  //  - kAlreadyExists: the domain serves it already (its own ring included);
  //  - kFailedPrecondition: the ring was created with IORING_SETUP_SINGLE_ISSUER (the kernel
  //    then refuses registrations from any other thread, and pools grow from theirs); it has a
  //    buffer table and options.register_table is true; it has none, or a smaller one, and
  //    options.register_table is false ("register a sparse table of N slots"); its memory is
  //    accounted to another process (a ring inherited across fork or taken with pidfd_getfd:
  //    the kernel refuses to clone into it, and the domain checks before registering into it);
  //    this kernel's clones would drop the application table's later slots;
  //  - kResourceExhausted: RLIMIT_MEMLOCK (kPerRing: the ring's own registrations; the message
  //    names the limit and the fix), kernel memory, descriptors;
  //  - kInternal: the kernel refused a clone or a registration for another reason (its errno).
  virtual absl::Status AddRing(io_uring* ring, IoUringRingOptions options = {}) = 0;
  // `ring` leaves: the domain's slots are emptied in it (and its table unregistered if pinpool
  // registered it: on kernels before 6.13 this waits until the ring's I/O on those buffers is
  // done and its pins are dropped). Do this before closing the ring. Errors: kNotFound (not
  // served), kFailedPrecondition (the domain's own ring, which leaves with the domain; or a ring
  // closed under the pool, whose registrations pinpool dropped when it noticed: the message says
  // so).
  virtual absl::Status RemoveRing(io_uring* ring) = 0;
  // True when the domain serves `ring` (its own, or one that joined and has not left or been
  // closed): a block's BufferIndex is valid on it.
  virtual bool Serves(const io_uring* ring) const = 0;
  // Rings served now, the domain's own included.
  virtual std::size_t rings() const = 0;
  // How chunks reach the rings that joined, on this kernel with these options.
  virtual IoUringSharing sharing() const = 0;
};

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_IO_URING_H_
