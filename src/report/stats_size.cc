// PoolStats as the program that made it was compiled (stats_size.h has the contract).
#include "report/stats_size.h"

#include <cstdint>
#include <utility>

namespace pinpool::internal {
namespace {

// Where member `m` of `s` ends, from the start of `s`.
template <typename M>
std::size_t EndOf(const PoolStats& s, M PoolStats::*m) {
  return static_cast<std::size_t>(reinterpret_cast<const char*>(&(s.*m)) + sizeof(M) -
                                  reinterpret_cast<const char*>(&s));
}

template <typename Apply>
void ForEachKnownMember(const PoolStats& layout, std::size_t bytes, Apply apply) {
  std::apply(
      [&](auto... m) {
        (
            [&] {
              if (EndOf(layout, m) <= bytes) apply(m);
            }(),
            ...);
      },
      kPoolStatsMembers);
}

}  // namespace

void MoveKnownMembers(PoolStats&& from, PoolStats& to, std::size_t bytes) {
  ForEachKnownMember(from, bytes, [&](auto m) { to.*m = std::move(from.*m); });
}

const PoolStats& Complete(const PoolStats& s, PoolStats& storage) {
  if (s.struct_size >= sizeof(PoolStats)) return s;
  ForEachKnownMember(s, s.struct_size, [&](auto m) { storage.*m = s.*m; });
  return storage;
}

}  // namespace pinpool::internal
