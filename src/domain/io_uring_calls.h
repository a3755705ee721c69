// The io_uring_register calls the io_uring domain makes, by descriptor: the domain works on its
// own duplicates of the rings' descriptors (io_uring_ring_ref.h), and liburing's wrappers want a
// whole `struct io_uring`. Also the one call liburing 2.3 has no wrapper for at all: cloning a
// range of one ring's fixed-buffer table into another (IORING_REGISTER_CLONE_BUFFERS), and what
// the running kernel can clone, probed once per process.
//
// Each call returns what the kernel returned, as 0 / a count, or -errno. Thread-safe: the kernel
// serializes calls on one ring; the probe runs once (std::call_once).
#ifndef PINPOOL_DOMAIN_IO_URING_CALLS_H_
#define PINPOOL_DOMAIN_IO_URING_CALLS_H_

#include <cstddef>
#include <cstdint>

#include "pinpool/io_uring.h"

namespace pinpool::internal {

// Registers an empty (sparse) fixed-buffer table of `slots` entries on the ring `fd`: 0, or
// -EBUSY when it has a table already.
int RegisterSparseTable(int fd, std::uint32_t slots);
// Unregisters the ring's whole table. The kernel waits until no request uses any of its buffers
// and, before Linux 6.13, until the pins of buffers emptied earlier have been dropped (the
// delayed worker io_uring_domain.cc describes): what makes a departure wait for its pins.
int UnregisterTable(int fd);
// Puts [base, base + length) into slot `slot` of the ring's table (a long-term pin, charged to
// RLIMIT_MEMLOCK), or empties the slot when `base` is null: 1, or -errno. Consults the fault
// hook (os::Call::kPinBuffer) when it pins.
int UpdateSlot(int fd, std::uint32_t slot, void* base, std::size_t length);

// What IORING_REGISTER_CLONE_BUFFERS can do on this kernel (pinpool/io_uring.h), probed on first
// use by cloning between rings of a few slots (and one pinned page, to see whether a range clone
// keeps the destination's later entries); cached. All false where io_uring cannot be used.
const IoUringCloneSupport& KernelCloneSupport();

// Clones slots [first, first + count) of the ring `src_fd`'s table into the same slots of the
// ring `dst_fd`, replacing what those slots held (IORING_REGISTER_DST_REPLACE): the pages are
// neither pinned nor charged again. 0, or -errno (EINVAL: the rings' memory is accounted to
// different processes or users, or the kernel cannot clone ranges). Consults the fault hook
// (os::Call::kCloneBuffers).
int CloneSlots(int dst_fd, int src_fd, std::uint32_t first, std::uint32_t count);

}  // namespace pinpool::internal

#endif  // PINPOOL_DOMAIN_IO_URING_CALLS_H_
