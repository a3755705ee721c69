// What the binding knows about fork(): a generation number that a fork child's first act
// (pthread_atfork) moves on. Every object that reaches pool memory, a registration or a device
// records the generation it was made in; in a fork child it is a stale one, and then:
//  - every call through it raises pinpool.ForkedError (the child has no mapping of the pool's
//    chunks, which are MADV_DONTFORK, and the parent's registrations, rings and device contexts
//    are not the child's to use: attach instead, docs/python.md);
//  - its destruction leaks the C++ object instead of running its destructor, which would
//    deregister, unmap or free the parent's resources through descriptors the child inherited
//    (an io_uring buffer table, a verbs context) or touch memory the child does not have.
// A child that never reaches pool memory (a DataLoader worker forked from a process with a pool,
// say) therefore runs and exits normally.
// Thread safety: the generation is an atomic; Stale() is one relaxed load.
#ifndef PINPOOL_PYTHON_FORK_H_
#define PINPOOL_PYTHON_FORK_H_

#include <atomic>
#include <cstdint>

namespace pinpool::python {

extern std::atomic<std::uint64_t> fork_generation;

// Installs the pthread_atfork child handler (once, at import).
void WatchForks();

inline std::uint64_t Generation() noexcept {
  return fork_generation.load(std::memory_order_relaxed);
}
// True in a fork child for an object made before the fork.
inline bool Stale(std::uint64_t generation) noexcept { return generation != Generation(); }

// Raises pinpool.ForkedError (a C++ exception pybind11 turns into it) when `generation` is stale;
// `what` names the object ("pool", "block", ...).
void CheckNotForked(std::uint64_t generation, const char* what);
// The same for raw C API code: false with the Python error set.
bool NotForked(std::uint64_t generation, const char* what);

}  // namespace pinpool::python

#endif  // PINPOOL_PYTHON_FORK_H_
