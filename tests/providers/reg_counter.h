// Counts the memory registrations a process makes with the RDMA device, whoever makes them
// (UCX's and libfabric's verbs code included), so that tests can prove that moving a pool block
// registers nothing. Test support, linked into the device test programs only.
//
// The program defines libibverbs' registration entry points (ibv_reg_mr, ibv_reg_mr_iova,
// ibv_reg_mr_iova2) itself and exports them (ENABLE_EXPORTS), so the dynamic linker binds every
// library's calls to these; each counts and forwards to libibverbs' own (dlvsym). Thread safety:
// the counter is atomic.
#ifndef PINPOOL_TESTS_PROVIDERS_REG_COUNTER_H_
#define PINPOOL_TESTS_PROVIDERS_REG_COUNTER_H_

#include <cstdint>

namespace pinpool::testing {

// Registrations made by the process so far (any of the three calls, successful or not).
std::uint64_t Registrations();

}  // namespace pinpool::testing

#endif  // PINPOOL_TESTS_PROVIDERS_REG_COUNTER_H_
