// Inside the os room: creating the file behind a memfd- or file-backed chunk (chunk_file.cc),
// for map_chunk.cc. The types (BackingSpec, ChunkFile) are in os.h.
// Thread-safe: no state.
#ifndef PINPOOL_OS_CHUNK_FILE_H_
#define PINPOOL_OS_CHUNK_FILE_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "os/os.h"

namespace pinpool::internal::os {

// A new file of `length` bytes for one chunk, as `backing` says: a memfd (MFD_CLOEXEC,
// MFD_ALLOW_SEALING, and MFD_HUGETLB of `hugetlb_page_bytes` when not 0), sealed against
// shrinking and growing; or backing.directory/backing.name, created O_EXCL with mode 0600.
// Errors leave nothing behind: kAlreadyExists (the file exists), kPermissionDenied,
// kResourceExhausted (no space, no descriptor, no lock), kFailedPrecondition, kInternal (the seals
// refused).
absl::StatusOr<ChunkFile> CreateChunkFile(const BackingSpec& backing, std::size_t length,
                                          std::size_t hugetlb_page_bytes);

// Ownership: the process that owns a chunk's file (creates it, or adopts it after a handover)
// holds flock(LOCK_EX) on its own open file description for as long as it owns it, so a second
// process adopting the same file finds it taken. CreateChunkFile takes it; a handover releases it
// (UnlockOwnership) before the descriptors leave.
void UnlockOwnership(int fd) noexcept;
// Takes it (without waiting): 0, or errno (EWOULDBLOCK: another open file description holds it;
// ENOLCK). A fault point (kLockFile).
int LockOwnership(int fd) noexcept;

// What a received chunk file is, once checked (CheckChunkFile).
struct ChunkFileFacts {
  bool sealed = false;                 // truncation refused by seals
  std::size_t hugetlb_page_bytes = 0;  // its hugetlb page size; 0 when not hugetlb
};
// Checks that `fd` (received from another process) is a chunk's file: a regular file on tmpfs or
// hugetlbfs of `length` bytes; with `path`, the file of that name; without, a memfd sealed against
// shrinking and growing. kInvalidArgument saying which check failed.
absl::StatusOr<ChunkFileFacts> CheckChunkFile(int fd, const std::string& path, std::size_t length);

// A chunk's file received from its previous owner (`fd`, which stays the caller's; `path`: the
// name it had in a directory, empty for a memfd), checked and reopened as this process's own
// (a new open file description, its ownership lock taken). Refused: what CheckChunkFile refuses
// (kInvalidArgument, saying which); a file another process owns (kFailedPrecondition: its
// ownership lock is held); no descriptor or lock to be had (kResourceExhausted); the file cannot
// be opened (kPermissionDenied). Nothing is left open on error.
absl::StatusOr<ChunkFile> AdoptChunkFile(int fd, const std::string& path, std::size_t length);

}  // namespace pinpool::internal::os

#endif  // PINPOOL_OS_CHUNK_FILE_H_
