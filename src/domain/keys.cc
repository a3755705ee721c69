// Names of the public enums in pinpool/keys.h, for stats, errors and tools.
#include "pinpool/keys.h"

namespace pinpool {

const char* PageSizeName(PageSize p) noexcept {
  switch (p) {
    case PageSize::k1G:
      return "1G";
    case PageSize::k2M:
      return "2M";
    case PageSize::kTransparent:
      return "THP";
    case PageSize::k4K:
      return "4K";
  }
  return "?";
}

const char* DomainKindName(DomainKind k) noexcept {
  switch (k) {
    case DomainKind::kHost:
      return "host";
    case DomainKind::kVerbs:
      return "verbs";
    case DomainKind::kIoUring:
      return "io_uring";
    case DomainKind::kCustom:
      return "custom";
  }
  return "?";
}

const char* PinningName(Pinning p) noexcept {
  switch (p) {
    case Pinning::kNone:
      return "none";
    case Pinning::kResident:
      return "resident";
    case Pinning::kLongTerm:
      return "long-term";
  }
  return "?";
}

const char* PinningDescription(Pinning p) noexcept {
  switch (p) {
    case Pinning::kNone:
      return "not pinned: the pages may be swapped out or moved";
    case Pinning::kResident:
      return "resident, not pinned: the physical address may change; not for DMA";
    case Pinning::kLongTerm:
      return "long-term pinned: physical addresses fixed (counted in VmPin)";
  }
  return "?";
}

}  // namespace pinpool
