// The pin-only host domain: mlock(2) keeps a chunk resident, so its physical pages do not move
// while a device or the kernel reads them. No keys; Keys::base and length record the range.
// Stateless, so one instance may serve any number of pools and threads.
#include "domain/memlock.h"
#include "os/os.h"
#include "pinpool/domain.h"

namespace pinpool {
namespace {

class HostDomain final : public Domain {
 public:
  DomainKind kind() const noexcept override { return DomainKind::kHost; }
  std::string name() const override { return "host"; }

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

std::shared_ptr<Domain> MakeHostDomain() { return std::make_shared<HostDomain>(); }

}  // namespace pinpool
