# shellcheck shell=bash
# The helpers every host-side test script shares (tests/, examples/, the soft-RoCE wrappers), once:
# how a test says it failed or skipped, the check that this machine can boot the soft-RoCE guest,
# and reading rxe0's packet counters in a guest and comparing them from the host.
#
#   source "$(dirname "${BASH_SOURCE[0]}")/<up to the root>/scripts/lib/harness.sh" NAME
#
# after `set -euo pipefail`; not executable. Contract: NAME prefixes every message (HARNESS_NAME);
# `repo` is set (read-only) to the repository's root. fail exits 1, skip exits 77 (ctest's
# SKIP_RETURN_CODE), both after one line on stderr. Defines these functions and variables only:
# no traps, no directory changes, nothing else run at source time. The guest's own scripts
# (scripts/softroce/guest-init.sh, guest-session.sh) report to the host through the guest's ports instead and do not
# use it.

HARNESS_NAME=${1:?usage: source harness.sh NAME}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck disable=SC2034 # used by the scripts that source this one
readonly repo

# fail MESSAGE...: the test failed.
fail() {
  echo "$HARNESS_NAME: FAIL: $*" >&2
  exit 1
}

# skip MESSAGE...: the test cannot run here, and says why (exit 77).
skip() {
  echo "$HARNESS_NAME: SKIP: $*" >&2
  exit 77
}

# require_qemu [WHY_NOT_IN_A_GUEST]: returns when this machine can boot the soft-RoCE guest. Skips
# when QEMU is missing, unless PINPOOL_REQUIRE_RDMA=1 (scripts/test.sh, CI), which makes that a
# failure. With an argument, a script already inside a guest (PINPOOL_SOFTROCE=1) skips with it.
require_qemu() {
  if [ $# -gt 0 ] && [ "${PINPOOL_SOFTROCE:-0}" = 1 ]; then
    skip "inside a guest already; $1"
  fi
  command -v qemu-system-x86_64 >/dev/null && return 0
  [ "${PINPOOL_REQUIRE_RDMA:-0}" = 1 ] &&
    fail "qemu-system-x86_64 missing and PINPOOL_REQUIRE_RDMA=1; run scripts/setup-vm-deps.sh"
  skip "qemu-system-x86_64 missing, cannot boot the soft-RoCE guest; run scripts/setup-vm-deps.sh"
}

# rxe_counters WHEN (in a guest): prints "counters: WHEN sent=N rcvd=M", rxe0's packets so far.
rxe_counters() {
  local dir=/sys/class/infiniband/rxe0/ports/1/hw_counters
  echo "counters: $1 sent=$(cat "$dir/sent_pkts") rcvd=$(cat "$dir/rcvd_pkts")"
}

# rxe_moved OUTPUT HOST (on the host): prints "SENT RCVD", how many packets HOST's rxe0 moved
# between its "before" and "after" rxe_counters lines in OUTPUT (run-two-guests.sh's output,
# each line prefixed "[HOST] "). Fails when HOST did not print both.
rxe_moved() {
  local out=$1 host=$2 before after
  before=$(sed -n "s/^\[$host\] counters: before sent=\([0-9]*\) rcvd=\([0-9]*\)$/\1 \2/p" <<<"$out")
  after=$(sed -n "s/^\[$host\] counters: after sent=\([0-9]*\) rcvd=\([0-9]*\)$/\1 \2/p" <<<"$out")
  if [ -z "$before" ] || [ -z "$after" ]; then fail "$host did not report its rxe0 counters"; fi
  awk -v b="$before" -v a="$after" 'BEGIN { split(b, x, " "); split(a, y, " ");
    print y[1] - x[1], y[2] - x[2] }'
}
