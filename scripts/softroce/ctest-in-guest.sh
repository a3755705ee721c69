#!/usr/bin/env bash
# Runs one RDMA test program inside the soft-RoCE guest (run-in-guest.sh), for the ctest entries
# labelled `rdma` of tests/, bench/ and examples/:
#
#   scripts/softroce/ctest-in-guest.sh [--timeout SECONDS] -- COMMAND [ARG]...
#
# COMMAND always runs with PINPOOL_REQUIRE_RDMA=1: the guest has rxe0, so a test that finds no
# device there fails instead of skipping. Run from a directory the guest can see (not under /tmp);
# ctest runs it in the build tree.
# Exit status: COMMAND's in the guest (124 timeout, 125 guest failure, from run-in-guest.sh);
# 77 (skip) when this machine cannot boot the guest (no QEMU: run scripts/setup-vm-deps.sh),
# unless PINPOOL_REQUIRE_RDMA=1 (scripts/test.sh, CI), which makes that a failure (1).
# Inside a guest already (PINPOOL_SOFTROCE=1) it runs COMMAND in place.
set -euo pipefail

# shellcheck source=../lib/harness.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh" rdma  # sets repo
timeout_seconds=600

while [ $# -gt 0 ]; do
  case $1 in
    --timeout) timeout_seconds=$2; shift 2 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
if [ $# -eq 0 ]; then
  echo "usage: $0 [--timeout SECONDS] -- COMMAND [ARG]..." >&2
  exit 1
fi

[ "${PINPOOL_SOFTROCE:-0}" = 1 ] || require_qemu

# Exported as well as passed: run-in-guest.sh gives COMMAND a clean environment from a host, but
# inside a guest it runs COMMAND with this one.
export PINPOOL_REQUIRE_RDMA=1
exec "$repo/scripts/softroce/run-in-guest.sh" --timeout "$timeout_seconds" \
  --env PINPOOL_REQUIRE_RDMA --env GTEST_COLOR=no -- "$@"
