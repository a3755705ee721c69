// io_uring fixed-buffer domain: registers each chunk as one fixed buffer of a ring, so blocks can
// be read and written with IORING_OP_READ_FIXED / WRITE_FIXED and no per-I/O page pinning.
//
// The domain uses a sparse buffer table (registered once) and fills one slot per chunk, so growth
// never re-registers what is already there; a chunk's slot is emptied when the pool lets it go.
// A block's BufferIndex (Block::buffer_index(d)) is the slot to put in sqe->buf_index, and the
// block's own address is the address to read or write.
//
// Registration takes a long-term pin (Pinning::kLongTerm): the pages cannot migrate while
// registered, they count in VmPin, and io_uring checks them against RLIMIT_MEMLOCK per user,
// across all of the user's processes. Linux 6.1 drops the pin of an emptied slot about a second
// later, from a kernel worker; destroying the domain waits for all of them. (The default
// domain, MakeLongTermPinDomain, pins the same way with rings of its own when a pool needs the
// pin but no I/O.)
//
// Thread safety: Register/Deregister may be called from several threads and pools at once. The
// ring itself is the application's to submit on; pinpool only registers buffers on it.
#ifndef PINPOOL_IO_URING_H_
#define PINPOOL_IO_URING_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "pinpool/abi.h"
#include "pinpool/domain.h"
#include "pinpool/export.h"

struct io_uring;  // liburing's ring

namespace pinpool {
PINPOOL_ABI_BEGIN

struct IoUringDomainOptions {
  // Slots pinpool may use: [first_slot, first_slot + slots). Each chunk of each pool using the
  // domain takes one.
  std::uint32_t first_slot = 0;
  std::uint32_t slots = 1024;
  // True: pinpool registers a sparse table of first_slot + slots entries on the ring (which must
  // have no buffer table yet). False: the application already registered a sparse table that
  // covers those slots, and pinpool only updates them.
  bool register_table = true;
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

  // The ring to submit I/O on.
  virtual io_uring* ring() const noexcept = 0;
  // Slots holding a chunk right now.
  virtual std::uint32_t slots_in_use() const = 0;
};

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_IO_URING_H_
