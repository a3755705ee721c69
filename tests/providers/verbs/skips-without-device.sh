#!/usr/bin/env bash
# Proves the RDMA tests' behaviour on a machine without an RDMA device (ctest
# `rdma.skips_without_device`, run on the host):
#   1. without PINPOOL_REQUIRE_RDMA every test is skipped, each with the stated reason and the way
#      to get a device (scripts/softroce/run-in-guest.sh), and the program exits 0;
#   2. with PINPOOL_REQUIRE_RDMA=1 the same tests fail (non-zero exit, no skip).
#
#   tests/providers/verbs/skips-without-device.sh TEST_PROGRAM
#
# Exit status: 0 both hold; 1 either does not; 77 (skip) when this machine has an RDMA device, so
# that there is nothing to check here (the tests then run against it).
set -euo pipefail

program=${1:?usage: skips-without-device.sh TEST_PROGRAM}
readonly reason='run through scripts/softroce/run-in-guest.sh'

# shellcheck source=../../../scripts/lib/harness.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../../scripts/lib/harness.sh" skips-without-device  # sets repo

if [ -n "$(ls -A /sys/class/infiniband 2>/dev/null)" ]; then
  skip "this machine has RDMA devices: $(ls /sys/class/infiniband)"
fi

rc=0
out=$(env -u PINPOOL_REQUIRE_RDMA GTEST_COLOR=no "$program" 2>&1) || rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || fail "without PINPOOL_REQUIRE_RDMA the program exited $rc, expected 0 (all skipped)"
tests=$(grep -c '^\[ RUN      \]' <<<"$out" || true)
# One "[  SKIPPED ] Suite.Test (N ms)" line per skipped test (the summary lines have no time).
skipped=$(grep -cE '^\[  SKIPPED \] [^ ]+ \([0-9]+ ms\)$' <<<"$out" || true)
reasons=$(grep -cF "$reason" <<<"$out" || true)
[ "$tests" -gt 0 ] || fail "no test ran"
[ "$skipped" -eq "$tests" ] || fail "$tests tests ran but only $skipped were skipped"
[ "$reasons" -ge "$tests" ] || fail "only $reasons of $tests skips state the reason '$reason'"
echo "skips-without-device: $tests tests skipped, each with the reason"

rc=0
out=$(env PINPOOL_REQUIRE_RDMA=1 GTEST_COLOR=no "$program" 2>&1) || rc=$?
[ "$rc" -ne 0 ] || { printf '%s\n' "$out"; fail "with PINPOOL_REQUIRE_RDMA=1 the program passed without a device"; }
! grep -q '^\[  SKIPPED \]' <<<"$out" || fail "with PINPOOL_REQUIRE_RDMA=1 tests were still skipped"
failed=$(grep -c '^\[  FAILED  \].*\.' <<<"$out" || true)
grep -q 'PINPOOL_REQUIRE_RDMA=1' <<<"$out" || fail "the failures do not say PINPOOL_REQUIRE_RDMA=1 is why"
echo "skips-without-device: with PINPOOL_REQUIRE_RDMA=1 the program fails ($failed FAILED lines), as it must"
