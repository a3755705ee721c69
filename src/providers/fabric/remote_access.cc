// FabricRemoteAccess (pinpool/fabric.h): per-block grants on a libfabric domain, and per chunk
// run of an array (GrantArray: one block grant per Array::Slices slice). A grant is a
// registration of exactly the granted range with its own key; revoking it closes that
// registration (synchronously). The pool holds a freed block until every grant that reaches it
// is closed (pinpool/grant_lock.h), exactly as for the verbs domain's range regions.
//
// Owns: the grant registrations (fid_mr) it made, until revoked. A registration the provider
// refuses to close stays recorded as live, and its block stays held for good: never unsafe.
//
// Part of libpinpool_fabric, which uses libpinpool's public API only (GrantLock for the pool's
// grant bookkeeping). Thread safety: every method takes the pool's grant lock; blocks a
// revocation releases are freed after it is dropped.
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "pinpool/descriptor.h"
#include "pinpool/fabric.h"
#include "pinpool/grant_lock.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

class PINPOOL_NO_EXPORT FabricRemoteAccess::Impl final : public GrantHolder {
 public:
  Impl(Pool* pool, std::shared_ptr<FabricDomain> domain, std::size_t domain_index, fid_ep* endpoint)
      : pool_(pool), domain_(std::move(domain)), domain_index_(domain_index), endpoint_(endpoint) {
    GrantLock lock(*pool_);
    lock.AddHolder();
  }

  ~Impl() {
    GrantLock lock(*pool_);
    RevokeAllLocked(lock);
    lock.RemoveHolder();
  }

  absl::StatusOr<FabricGrant> Grant(const Block& block, std::size_t offset, std::size_t length,
                                    RemoteRights rights);
  absl::Status Revoke(std::uint64_t id);
  bool Ended(std::uint64_t id) const;
  void RevokeAllNow();
  std::size_t live() const {
    GrantLock lock(*pool_);
    return grants_.size();
  }
  bool range_enforced() const noexcept { return domain_->range_enforced(); }

  void RevokeForFree(GrantLock& lock, std::uint64_t id) override {
    auto it = grants_.find(id);
    if (it != grants_.end()) CloseLocked(lock, it).IgnoreError();  // failed: held for good
  }

 private:
  struct Record {
    void* block = nullptr;
    fid_mr* mr = nullptr;
  };
  using Iterator = std::unordered_map<std::uint64_t, Record>::iterator;

  // Closes a grant's registration and ends it; the record stays (live) if the provider refuses.
  absl::Status CloseLocked(GrantLock& lock, Iterator it) {
    if (const int r = fi_close(&it->second.mr->fid); r != 0) {
      return FabricError(r, absl::StrFormat("FabricRemoteAccess::Revoke: closing grant %d's "
                                            "registration (its block stays held for good)",
                                            it->first));
    }
    GrantStats& c = lock.counters();
    --c.live;
    lock.Count("fabric_region_deregistrations", "libfabric grant registrations closed");
    lock.End(it->second.block, *this, it->first);
    grants_.erase(it);
    return absl::OkStatus();
  }

  // Closes every grant; for the destructor and RevokeAllNow.
  void RevokeAllLocked(GrantLock& lock);

  Pool* const pool_;
  const std::shared_ptr<FabricDomain> domain_;
  const std::size_t domain_index_;
  fid_ep* const endpoint_;
  // Guarded by the pool's grant lock.
  std::unordered_map<std::uint64_t, Record> grants_;  // live grants
  std::uint64_t next_id_ = 1;
  bool closed_ = false;
};

absl::StatusOr<FabricGrant> FabricRemoteAccess::Impl::Grant(const Block& block, std::size_t offset,
                                                            std::size_t length,
                                                            RemoteRights rights) {
  if (!rights.any()) {
    return absl::InvalidArgumentError(
        "FabricRemoteAccess::Grant: no rights asked for (RemoteRights)");
  }
  if (!block) return absl::InvalidArgumentError("FabricRemoteAccess::Grant: empty Block");
  if (length == 0 || offset > block.size() || length > block.size() - offset) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "FabricRemoteAccess::Grant: range [%d, %d) is empty or outside the %d-byte block", offset,
        offset + length, block.size()));
  }
  const std::optional<Location> where = pool_->Lookup(block.data());
  if (!where || where->domain_count() <= domain_index_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "FabricRemoteAccess::Grant: block %p is not memory of this access's pool", block.data()));
  }
  const FabricChunk& chunk = FabricChunkOf(*where, domain_index_);
  const auto address = reinterpret_cast<std::uintptr_t>(block.data()) + offset;
  std::uint64_t access = 0;
  if (rights.read || rights.atomic) access |= FI_REMOTE_READ;
  if (rights.write || rights.atomic) access |= FI_REMOTE_WRITE;

  FabricGrant grant;
  {
    GrantLock lock(*pool_);
    if (closed_) {
      return absl::FailedPreconditionError(
          "FabricRemoteAccess::Grant: every grant was revoked (RevokeAllNow); create a new "
          "FabricRemoteAccess");
    }
    if (absl::Status live = lock.CheckLive(block); !live.ok()) {
      return absl::Status(live.code(), absl::StrCat("FabricRemoteAccess::Grant: ", live.message()));
    }
    absl::StatusOr<fid_mr*> mr =
        domain_->RegisterRange(reinterpret_cast<void*>(address), length, access, endpoint_);
    if (!mr.ok()) {
      return absl::Status(mr.status().code(),
                          absl::StrCat("FabricRemoteAccess::Grant: ", mr.status().message()));
    }
    const std::uint64_t key = fi_mr_key(*mr);
    if (domain_->provider_keys() && key == chunk.key) {
      // A registration cache handed back the chunk's registration: the key would open the
      // whole chunk, with whatever rights the cache registered it with.
      fi_close(&(*mr)->fid);
      return absl::FailedPreconditionError(absl::StrFormat(
          "FabricRemoteAccess::Grant: %s returned the chunk's own registration (key %#x) for a "
          "range "
          "inside it: its registration cache is on, so a grant cannot be confined to a range. "
          "Set FI_MR_CACHE_MAX_COUNT=0 before the domain is opened (pinpool's chunks are "
          "registered once and need no cache)",
          domain_->name(), key));
    }
    const std::uint64_t id = next_id_++;
    grants_[id] = Record{.block = block.data(), .mr = *mr};
    GrantStats& c = lock.counters();
    ++c.grants;
    ++c.live;
    lock.Count("fabric_region_registrations", "libfabric registrations made for grants");
    lock.Begin(block, *this, id);
    grant = FabricGrant{.id = id,
                        .remote = {.address = domain_->virtual_addressing() ? address : 0,
                                   .key = key,
                                   .length = length},
                        .range_enforced = domain_->range_enforced()};
  }
  return grant;
}

absl::Status FabricRemoteAccess::Impl::Revoke(std::uint64_t id) {
  GrantLock lock(*pool_);
  auto it = grants_.find(id);
  if (it == grants_.end()) {
    if (id != 0 && id < next_id_) return absl::OkStatus();  // ended already
    return absl::NotFoundError(
        absl::StrFormat("FabricRemoteAccess::Revoke: grant %d was never issued here", id));
  }
  return CloseLocked(lock, it);
}

bool FabricRemoteAccess::Impl::Ended(std::uint64_t id) const {
  GrantLock lock(*pool_);
  return id != 0 && id < next_id_ && grants_.find(id) == grants_.end();
}

void FabricRemoteAccess::Impl::RevokeAllLocked(GrantLock& lock) {
  closed_ = true;
  for (auto it = grants_.begin(); it != grants_.end();) {
    auto next = std::next(it);
    CloseLocked(lock, it).IgnoreError();  // a refused close keeps its block held
    it = next;
  }
}

void FabricRemoteAccess::Impl::RevokeAllNow() {
  GrantLock lock(*pool_);
  RevokeAllLocked(lock);
}

// --- FabricRemoteAccess
// ----------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<FabricRemoteAccess>> FabricRemoteAccess::Create(Pool& pool,
                                                                               std::size_t domain,
                                                                               fid_ep* endpoint) {
  const auto& domains = pool.options().domains;
  std::shared_ptr<FabricDomain> fabric =
      domain < domains.size() ? std::dynamic_pointer_cast<FabricDomain>(domains[domain]) : nullptr;
  if (fabric == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "FabricRemoteAccess::Create: domain number %d of the pool is not a FabricDomain", domain));
  }
  if ((fabric->mr_mode() & FI_MR_ENDPOINT) != 0 && endpoint == nullptr &&
      fabric->options().endpoint == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("FabricRemoteAccess::Create: %s binds registrations to an endpoint "
                        "(FI_MR_ENDPOINT): pass the "
                        "endpoint the grants are for",
                        fabric->name()));
  }
  if (fabric->shared_registrations()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "FabricRemoteAccess::Create: %s shares registrations (its registration cache returned a "
        "chunk's registration for a range inside it), so a grant could not be confined to its "
        "range. Set FI_MR_CACHE_MAX_COUNT=0 before the domain is opened (pinpool's chunks are "
        "registered once and need no cache)",
        fabric->name()));
  }
  return std::unique_ptr<FabricRemoteAccess>(
      new FabricRemoteAccess(std::make_unique<Impl>(&pool, std::move(fabric), domain, endpoint)));
}

FabricRemoteAccess::FabricRemoteAccess(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FabricRemoteAccess::~FabricRemoteAccess() = default;

absl::StatusOr<FabricGrant> FabricRemoteAccess::Grant(const Block& block, RemoteRights rights) {
  return impl_->Grant(block, 0, block.size(), rights);
}
absl::StatusOr<FabricGrant> FabricRemoteAccess::Grant(const Block& block, std::size_t offset,
                                                      std::size_t length, RemoteRights rights) {
  return impl_->Grant(block, offset, length, rights);
}
absl::StatusOr<std::vector<FabricGrant>> FabricRemoteAccess::GrantArray(const Array& array,
                                                                        RemoteRights rights,
                                                                        std::size_t first,
                                                                        std::size_t count) {
  std::vector<FabricGrant> grants;
  absl::Status s = GrantSlices(
      array, first, count, "FabricRemoteAccess::GrantArray",
      [&](const ArraySlice& slice) -> absl::Status {
        absl::StatusOr<FabricGrant> g =
            impl_->Grant(array.Run(slice.run), slice.offset, slice.length, rights);
        if (!g.ok()) return g.status();
        grants.push_back(*g);
        return absl::OkStatus();
      },
      [&] {
        for (const FabricGrant& made : grants) impl_->Revoke(made.id).IgnoreError();
      });
  if (!s.ok()) return s;
  return grants;
}

absl::StatusOr<std::vector<std::byte>> DescribeGrants(const Array& array,
                                                      std::span<const FabricGrant> grants) {
  std::vector<GrantedRange> ranges;
  for (const FabricGrant& g : grants) {
    ranges.push_back({.address = g.remote.address, .key = g.remote.key, .length = g.remote.length});
  }
  return DescribeRanges(array, ranges);
}

absl::Status FabricRemoteAccess::Revoke(const FabricGrant& grant) {
  return impl_->Revoke(grant.id);
}
bool FabricRemoteAccess::Ended(const FabricGrant& grant) const { return impl_->Ended(grant.id); }
void FabricRemoteAccess::RevokeAllNow() { impl_->RevokeAllNow(); }
std::size_t FabricRemoteAccess::live_grants() const { return impl_->live(); }
bool FabricRemoteAccess::range_enforced() const noexcept { return impl_->range_enforced(); }

PINPOOL_ABI_END
}  // namespace pinpool
