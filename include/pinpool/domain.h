// Domain: something a chunk of memory is registered with (an RDMA protection domain, an io_uring
// buffer table, or the host's page pinning). The arena is the only caller.
//
// Contract for implementations:
//  - Register() is given a mapped range (populated unless PoolOptions::populate is off) and either
//    registers all of it and returns its keys, or registers nothing and returns an error saying
//    what limit was hit and how to fix it.
//  - Deregister() undoes exactly one successful Register(); it cannot fail.
//  - Neither is ever called on the allocation fast path. Calls for one pool are serialized; a
//    domain shared by several pools must be safe to call from several threads.
#ifndef PINPOOL_DOMAIN_H_
#define PINPOOL_DOMAIN_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "pinpool/keys.h"

namespace pinpool {

class Domain {
 public:
  virtual ~Domain() = default;

  virtual DomainKind kind() const noexcept = 0;
  // Short human-readable name for stats and errors ("host", "rxe0/pd0", ...).
  virtual std::string name() const = 0;
  // True when registration pins pages against RLIMIT_MEMLOCK, so the pool checks headroom first.
  virtual bool pins_memory() const noexcept { return true; }

  virtual absl::StatusOr<Keys> Register(void* base, std::size_t length) = 0;
  virtual void Deregister(const Keys& keys) noexcept = 0;
};

// Pin-only host memory: mlock(2)s each chunk so it stays resident at a fixed physical address
// (what kernel-bypass I/O without an RDMA device needs). The default when a pool names no domain.
std::shared_ptr<Domain> MakeHostDomain();

}  // namespace pinpool

#endif  // PINPOOL_DOMAIN_H_
