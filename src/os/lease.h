// Inside the os room: the write lease pinpool holds on a file-backed chunk's file (kFile
// backing), so that it learns when another process wants the file's pages (an open for writing,
// a truncate, an O_TRUNC open, even an open for reading) before the kernel lets that happen, and
// can give the chunk back first (docs/backing.md, "Taking memory back").
//
// Why a write lease and how it is watched (measured, docs/backing.md):
//  - a read lease is refused (EAGAIN) while the file is open for writing anywhere, and a chunk's
//    own descriptor is O_RDWR (its mapping is shared and writable): only a write lease is
//    possible, and only while that descriptor is the file's one open file description;
//  - the kernel would announce a break with SIGIO, whose default action ends the process, and
//    any signal would be the application's to own: after taking the lease, F_SETOWN 0 leaves the
//    break with no process to signal, and the holder polls F_GETLEASE instead (it reads F_UNLCK
//    or F_RDLCK from the moment a break starts);
//  - the breaker waits in open() or truncate() until the lease is released (F_SETLEASE F_UNLCK)
//    or /proc/sys/fs/lease-break-time seconds pass. Closing the descriptor is not enough while a
//    forked child still holds a copy of it: ReleaseLease unlocks explicitly.
// A hole punch (fallocate PUNCH_HOLE) does not break a lease, but needs a descriptor open for
// writing, and opening the file breaks the lease first.
//
// Thread-safe: no state; each descriptor's owner serializes its own calls.
#ifndef PINPOOL_OS_LEASE_H_
#define PINPOOL_OS_LEASE_H_

#include "absl/status/status.h"

namespace pinpool::internal::os {

// Takes a write lease on `fd` (a chunk's file, open O_RDWR, owned by this process) and leaves
// no process to signal when it breaks. kFailedPrecondition when another open file description
// of the file exists (another process opened it: the message says so) or leases are disabled
// (/proc/sys/fs/leases-enable); kPermissionDenied when this process does not own the file.
// `what` names the file in messages. On error no lease is held.
absl::Status TakeWriteLease(int fd, const char* what);

// Whether the write lease on `fd` still stands: false from the moment another process's open or
// truncate starts to break it (and when no lease is held). One fcntl, no lock.
bool LeaseHeld(int fd) noexcept;

// Releases the lease on `fd`, if any, so that a breaker waiting on it proceeds at once.
void ReleaseLease(int fd) noexcept;

}  // namespace pinpool::internal::os

#endif  // PINPOOL_OS_LEASE_H_
