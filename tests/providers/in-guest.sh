#!/usr/bin/env bash
# The providers' device tests, run INSIDE one soft-RoCE guest (ctest `rdma.providers_in_guest`, booted
# by scripts/softroce/ctest-in-guest.sh with PINPOOL_REQUIRE_RDMA=1):
#
#   tests/providers/in-guest.sh UCX_RDMA_TEST|- FABRIC_RDMA_TEST|- [BENCHMARK|-] [PINPOOL_INFO|-]
#
#   1. ucx_rdma_test: UCX over rc_verbs on rxe0 (UCX_TLS=rc, UCX_IB_GID_INDEX=0);
#   2. fabric_rdma_test twice, since libfabric reads its cache settings once per process: with
#      the verbs provider's registration cache off (FI_MR_CACHE_MAX_COUNT=0) and on (default);
#      verbs;ofi_rxm on rxe needs FI_UNIVERSE_SIZE=64;
#   3. the providers benchmark, as a smoke run (a few iterations of everything it measures), with
#      libfabric's cache on and off;
#   4. pinpool-info's providers section: UCX offers rc_verbs on rxe0, libfabric the verbs provider.
# Every program runs even when one fails; the exit status is 1 if any failed. A "-" skips one
# (its library was not built). The ctest entry also fails on any "[  SKIPPED ]" line.
set -uo pipefail

ucx=${1:?usage: in-guest.sh UCX_RDMA_TEST|- FABRIC_RDMA_TEST|- [BENCHMARK|-]}
fabric=${2:?usage: in-guest.sh UCX_RDMA_TEST|- FABRIC_RDMA_TEST|- [BENCHMARK|-]}
bench=${3:--}
info=${4:--}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PINPOOL_REQUIRE_RDMA=1 GTEST_COLOR=no
failed=()

step() {
  local name=$1
  shift
  echo "== providers in guest: $name"
  "$@" || failed+=("$name")
}

if [ "$ucx" != - ]; then
  step "UCX on rc_verbs" env UCX_TLS=rc UCX_IB_GID_INDEX=0 "$ucx"
fi
if [ "$fabric" != - ]; then
  step "libfabric verbs, cache off" env FI_UNIVERSE_SIZE=64 FI_MR_CACHE_MAX_COUNT=0 \
    "$fabric" --gtest_filter='NoCache*'
  step "libfabric verbs, cache on" env -u FI_MR_CACHE_MAX_COUNT FI_UNIVERSE_SIZE=64 \
    "$fabric" --gtest_filter='Cache*'
fi
if [ "$bench" != - ]; then
  step "providers benchmark (smoke)" env UCX_IB_GID_INDEX=0 FI_UNIVERSE_SIZE=64 \
    "$bench" --benchmark_min_time=0.001 --benchmark_repetitions=1
  step "providers benchmark, libfabric cache off (smoke)" env UCX_IB_GID_INDEX=0 \
    FI_UNIVERSE_SIZE=64 FI_MR_CACHE_MAX_COUNT=0 \
    "$bench" --benchmark_min_time=0.001 --benchmark_repetitions=1
fi
if [ "$info" != - ]; then
  step "pinpool-info providers" python3 "$here/check_info.py" guest "$info"
fi
if [ ${#failed[@]} -ne 0 ]; then
  echo "providers in guest: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "providers in guest: PASS"
