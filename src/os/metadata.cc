// Allocator metadata memory: plain anonymous mappings, counted like every other mapping of this
// room and open to fault injection. The heap takes its own bookkeeping from here rather than
// from malloc or operator new, so that an application that routes malloc (or operator new) to a
// pool never recurses into it, and so that its steady state calls no allocator at all.
// Thread-safe.
#include <sys/mman.h>

#include <cerrno>

#include "os/os.h"

namespace pinpool::internal::os {

void* MapMetadata(std::size_t length) noexcept {
  length = (length + kBasePage - 1) & ~(kBasePage - 1);
  if (length == 0 || InjectedFault(Call::kMapMetadata, length) != 0) return nullptr;
  counters().mmap.fetch_add(1, std::memory_order_relaxed);
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  counters().metadata_bytes.fetch_add(static_cast<std::int64_t>(length), std::memory_order_relaxed);
  return p;
}

void UnmapMetadata(void* at, std::size_t length) noexcept {
  if (at == nullptr) return;
  length = (length + kBasePage - 1) & ~(kBasePage - 1);
  counters().munmap.fetch_add(1, std::memory_order_relaxed);
  counters().metadata_bytes.fetch_sub(static_cast<std::int64_t>(length), std::memory_order_relaxed);
  munmap(at, length);
}

}  // namespace pinpool::internal::os
