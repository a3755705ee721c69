// Fork mode as libibverbs reports it, for diagnostics. pinpool itself does not depend on it: the
// os room marks every chunk MADV_DONTFORK, so a child has no mapping of pool memory at all and
// the parent's registered pages are never copied-on-write away from the device.
// Stateless; thread-safe.
#include "pinpool/verbs.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

ForkMode QueryForkMode() noexcept {
  switch (ibv_is_fork_initialized()) {
    case IBV_FORK_ENABLED:
      return ForkMode::kEnabled;
    case IBV_FORK_UNNEEDED:
      return ForkMode::kUnneeded;
    case IBV_FORK_DISABLED:
      break;
  }
  return ForkMode::kDisabled;
}

PINPOOL_ABI_END
}  // namespace pinpool
