// The long-term pin domain (MakeLongTermPinDomain), the default when a pool names no domain. Each
// chunk gets a long-term pin (FOLL_LONGTERM), so its physical addresses stay fixed while it is
// registered (docs/pinning.md), with no RDMA device and no privilege beyond RLIMIT_MEMLOCK: the
// chunk is registered as a fixed buffer in an io_uring table private to this domain. All the
// io_uring code is IoUringDomain's (io_uring_domain.cc), one per table; this file only adds
// tables as they fill and keeps their slots to itself (nobody submits I/O on these rings, so
// the keys carry no buffer index).
//
// Tables: each holds a fixed number of chunks (1024 by default). When every slot of every table
// is taken, Register opens one more ring with its own table, so the pools sharing the domain
// may have any number of chunks; tables stay until the domain goes. The first table is made when
// the domain is, so a machine where io_uring cannot be used fails at Pool::Create, with the
// cause and the alternatives, and never falls back to something weaker.
//
// Keys: base and length; handle = this domain's record of the registration (table and slot).
// Thread safety: Register holds mu_ (choosing a table and filling a slot is one step);
// Deregister touches only the registration's table, which has its own lock.
#include "domain/long_term_pin_domain.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "pinpool/io_uring.h"
#include "util/mutex.h"
#include "util/status_macros.h"

namespace pinpool {
namespace internal {
namespace {

// What Register hands out as Keys::handle.
struct Registration {
  IoUringDomain* table;
  Keys keys;  // the table's own keys (its slot)
};

absl::StatusOr<std::shared_ptr<IoUringDomain>> NewTable(std::uint32_t slots) {
  IoUringDomainOptions o;
  o.slots = slots;
  return IoUringDomain::Create(/*entries=*/1, o);  // nothing is ever submitted on it
}

class LongTermPinDomain final : public Domain {
 public:
  LongTermPinDomain(std::shared_ptr<IoUringDomain> first, std::uint32_t slots_per_table)
      : slots_per_table_(slots_per_table) {
    tables_.push_back(std::move(first));
  }

  DomainKind kind() const noexcept override { return DomainKind::kHost; }
  std::string name() const override { return "long-term pin"; }
  Pinning pinning() const noexcept override { return Pinning::kLongTerm; }
  // Its own lock serializes what must be (the table's slots); the kernel does the rest.
  bool concurrent_registration() const noexcept override { return true; }

  absl::StatusOr<Keys> Register(void* base, std::size_t length) override {
    MutexLock lock(&mu_);
    IoUringDomain* table = nullptr;
    for (const auto& t : tables_) {
      if (t->slots_in_use() < slots_per_table_) {
        table = t.get();
        break;
      }
    }
    if (table == nullptr) {
      absl::StatusOr<std::shared_ptr<IoUringDomain>> more = NewTable(slots_per_table_);
      if (!more.ok()) {
        return absl::Status(more.status().code(),
                            absl::StrFormat("all %d slots of the %d io_uring tables that pin "
                                            "chunks are in use, and another table failed: %s",
                                            slots_per_table_ * tables_.size(), tables_.size(),
                                            more.status().message()));
      }
      tables_.push_back(*std::move(more));
      table = tables_.back().get();
    }
    PINPOOL_ASSIGN_OR_RETURN(Keys pinned, table->Register(base, length));
    Keys keys;
    keys.base = pinned.base;
    keys.length = pinned.length;
    keys.handle = new Registration{table, pinned};
    return keys;
  }

  void Deregister(const Keys& keys) noexcept override {
    const std::unique_ptr<Registration> r(static_cast<Registration*>(keys.handle));
    r->table->Deregister(r->keys);
  }

  std::size_t tables() const {
    MutexLock lock(&mu_);
    return tables_.size();
  }

 private:
  const std::uint32_t slots_per_table_;
  mutable Mutex mu_;
  std::vector<std::shared_ptr<IoUringDomain>> tables_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::shared_ptr<Domain>> MakeLongTermPinDomain(std::uint32_t slots_per_table) {
  absl::StatusOr<std::shared_ptr<IoUringDomain>> table = NewTable(slots_per_table);
  if (!table.ok()) {
    return absl::Status(
        table.status().code(),
        absl::StrFormat(
            "long-term pinning is not available here: the default domain pins each chunk by "
            "registering it as an io_uring fixed buffer, and %s. Alternatives: an RDMA device's "
            "domain (PoolOptions::domains = {VerbsDomain::Open()}: ibv_reg_mr pins long-term), "
            "or, only for memory no device reads or writes, PoolOptions::domains = "
            "{MakeResidentNotPinnedDomain()} (mlock: resident, not pinned: the physical address "
            "may change; not for DMA)",
            table.status().message()));
  }
  return std::shared_ptr<Domain>(
      std::make_shared<LongTermPinDomain>(*std::move(table), slots_per_table));
}

std::size_t LongTermPinTables(const Domain& domain) {
  const auto* d = dynamic_cast<const LongTermPinDomain*>(&domain);
  return d == nullptr ? 0 : d->tables();
}

}  // namespace internal
PINPOOL_ABI_BEGIN

absl::StatusOr<std::shared_ptr<Domain>> MakeLongTermPinDomain() {
  return internal::MakeLongTermPinDomain(internal::kLongTermPinSlotsPerTable);
}

PINPOOL_ABI_END
}  // namespace pinpool
