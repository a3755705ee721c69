// PoolInternals: what code outside the core library that grants remote access (libpinpool_fabric's
// FabricAccess) needs of a Pool: its GrantRegistry, the bookkeeping of which blocks a peer can
// still reach. Built with the core at the same version; not a public interface.
//
// Thread safety: the registry's own (its mutex).
#ifndef PINPOOL_POOL_POOL_INTERNALS_H_
#define PINPOOL_POOL_POOL_INTERNALS_H_

#include "pinpool/pool.h"
#include "pool/grant_registry.h"

namespace pinpool::internal {

struct PoolInternals {
  static GrantRegistry& Grants(Pool& pool) noexcept { return *pool.grants_; }
};

}  // namespace pinpool::internal

#endif  // PINPOOL_POOL_POOL_INTERNALS_H_
