// See reg_counter.h. The definitions must match <infiniband/verbs.h>'s declarations; the header's
// ibv_reg_mr macro is undone so that the real function name can be defined.
#include "reg_counter.h"

#include <dlfcn.h>
#include <infiniband/verbs.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

namespace {

std::atomic<std::uint64_t> registrations{0};

template <typename F>
F Next(const char* name, const char* version) {
  void* f = dlvsym(RTLD_NEXT, name, version);
  if (f == nullptr) {
    std::fprintf(stderr, "reg_counter: libibverbs has no %s@%s\n", name, version);
    std::abort();
  }
  return reinterpret_cast<F>(f);
}

}  // namespace

namespace pinpool::testing {
std::uint64_t Registrations() { return registrations.load(); }
}  // namespace pinpool::testing

extern "C" {

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  static const auto next =
      Next<ibv_mr* (*)(ibv_pd*, void*, size_t, int)>("ibv_reg_mr", "IBVERBS_1.1");
  registrations.fetch_add(1);
  return next(pd, addr, length, access);
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  static const auto next =
      Next<ibv_mr* (*)(ibv_pd*, void*, size_t, uint64_t, int)>("ibv_reg_mr_iova", "IBVERBS_1.7");
  registrations.fetch_add(1);
  return next(pd, addr, length, iova, access);
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                         unsigned int access) {
  static const auto next = Next<ibv_mr* (*)(ibv_pd*, void*, size_t, uint64_t, unsigned int)>(
      "ibv_reg_mr_iova2", "IBVERBS_1.8");
  registrations.fetch_add(1);
  return next(pd, addr, length, iova, access);
}

}  // extern "C"
