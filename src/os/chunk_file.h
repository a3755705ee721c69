// Inside the os layer: creating the file behind a memfd- or file-backed chunk (chunk_file.cc),
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
// kResourceExhausted (no space), kFailedPrecondition.
absl::StatusOr<ChunkFile> CreateChunkFile(const BackingSpec& backing, std::size_t length,
                                          std::size_t hugetlb_page_bytes);

}  // namespace pinpool::internal::os

#endif  // PINPOOL_OS_CHUNK_FILE_H_
