// The resident-not-pinned domain (MakeResidentNotPinnedDomain): mlock(2) keeps a chunk in memory,
// never swapped out, and nothing more. The kernel may still migrate mlocked pages (compaction
// moved 8-22% of them in docs/pinning.md's measurements), so the physical address may change:
// not for DMA. For long-term pinned host memory see long_term_pin_domain.cc.
// No keys; Keys::base and length record the range. Stateless, so one instance may serve any
// number of pools and threads.
#include "domain/memlock.h"
#include "os/os.h"
#include "pinpool/domain.h"

namespace pinpool {
PINPOOL_ABI_BEGIN
namespace {

class ResidentNotPinnedDomain final : public Domain {
 public:
  DomainKind kind() const noexcept override { return DomainKind::kHost; }
  std::string name() const override { return "mlock (resident, not pinned)"; }
  Pinning pinning() const noexcept override { return Pinning::kResident; }
  // mlock and munlock of different chunks need no lock of ours.
  bool concurrent_registration() const noexcept override { return true; }

  absl::StatusOr<Keys> Register(void* base, std::size_t length) override {
    if (const int err = internal::os::Mlock(base, length); err != 0) {
      return internal::MemlockRefused("mlock", err, length);
    }
    Keys keys;
    keys.base = reinterpret_cast<std::uintptr_t>(base);
    keys.length = length;
    return keys;
  }

  void Deregister(const Keys& keys) noexcept override {
    internal::os::Munlock(reinterpret_cast<void*>(keys.base), keys.length);
  }
};

}  // namespace

std::shared_ptr<Domain> MakeResidentNotPinnedDomain() {
  return std::make_shared<ResidentNotPinnedDomain>();
}

PINPOOL_ABI_END
}  // namespace pinpool
