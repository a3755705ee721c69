// The transfer checks of pinpool/provider.h, for the writers of domains and providers: one wording
// of "that range is not inside the block" for every provider; and the provider libraries' way to
// the fault hook (os/os.h). (PinRefusedError, the other function of that header this room
// exports, is in memlock.cc with the rest of the memlock wording.)
//
// Owns nothing; pure functions, safe from any thread.
#include "pinpool/provider.h"

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "os/os.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

int InjectedProviderFault(ProviderCall call, std::size_t length) noexcept {
  using internal::os::Call;
  switch (call) {
    case ProviderCall::kUcxMap:
      return internal::os::InjectedFault(Call::kUcxMap, length);
    case ProviderCall::kUcxPack:
      return internal::os::InjectedFault(Call::kUcxPack, length);
    case ProviderCall::kFabricRegister:
      return internal::os::InjectedFault(Call::kFabricRegister, length);
    case ProviderCall::kFabricBind:
      return internal::os::InjectedFault(Call::kFabricBind, length);
    case ProviderCall::kFabricPost:
      return internal::os::InjectedFault(Call::kFabricPost, length);
  }
  return 0;
}

absl::Status CheckBlockDomain(const char* what, const Block& block, std::size_t domain) {
  if (!block) return absl::InvalidArgumentError(absl::StrFormat("%s: empty Block", what));
  if (domain >= block.domain_count()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: the block's pool has no domain number %d", what, domain));
  }
  return absl::OkStatus();
}

absl::Status CheckTransferRanges(const char* what, const Block& block, std::size_t offset,
                                 std::size_t length, const RemoteRange& remote,
                                 std::size_t remote_offset, std::size_t domain) {
  if (absl::Status s = CheckBlockDomain(what, block, domain); !s.ok()) return s;
  if (length == 0) return absl::InvalidArgumentError(absl::StrFormat("%s: length 0", what));
  if (!RangeInside(offset, length, block.size())) {
    return absl::OutOfRangeError(
        absl::StrFormat("%s: bytes [%d, %d) are outside the %d-byte block at %p; nothing posted",
                        what, offset, offset + length, block.size(), block.data()));
  }
  if (!RangeInside(remote_offset, length, remote.length)) {
    return absl::OutOfRangeError(absl::StrFormat(
        "%s: bytes [%d, %d) are outside the peer's %d bytes (%s %#x); nothing posted", what,
        remote_offset, remote_offset + length, remote.length, remote.key_kind, remote.key));
  }
  return absl::OkStatus();
}

PINPOOL_ABI_END
}  // namespace pinpool
