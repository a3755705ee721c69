#!/usr/bin/env bash
# Soft-RoCE smoke test: builds verbs_smoke.c on the host, runs it in the soft-RoCE guest
# (scripts/softroce/run-in-guest.sh) and checks that rxe0 handed out an lkey and an rkey.
#
#   tests/softroce/smoke.sh [--build-dir DIR] [--timeout SECONDS]
#
# DIR defaults to <repo>/build-vm/softroce; the guest sees the host's files at the same paths (under
# /tmp through an overlay). The binary also runs once on the host, where "no RDMA device" (exit 77) is
# the expected answer on machines without RDMA.
# Exit status: 0 pass; 1 fail; 77 skip when the harness cannot run here (no QEMU; run
# scripts/setup-vm-deps.sh) unless PINPOOL_REQUIRE_RDMA=1, which turns that skip into a failure (CI).
# A guest without rxe0 is always a failure, never a skip.
set -euo pipefail

# shellcheck source=../../scripts/lib/harness.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/harness.sh" "softroce smoke"  # sets repo
readonly expected='^verbs_smoke: device=rxe0 lkey=0x[0-9a-f]+ rkey=0x[0-9a-f]+ length=1048576$'
build_dir=$repo/build-vm/softroce
timeout_seconds=300

parse_args() {
  while [ $# -gt 0 ]; do
    case $1 in
      --build-dir) build_dir=$2; shift 2 ;;
      --timeout) timeout_seconds=$2; shift 2 ;;
      *) fail "usage: $0 [--build-dir DIR] [--timeout SECONDS]" ;;
    esac
  done
  build_dir=$(mkdir -p "$build_dir" && cd "$build_dir" && pwd)
}

build() {
  cc -std=c11 -O2 -Wall -Wextra -Werror "$repo/tests/softroce/verbs_smoke.c" \
    -o "$build_dir/verbs_smoke" -libverbs
}

run_without_guest() {
  local rc=0
  "$build_dir/verbs_smoke" || rc=$?
  case $rc in
    0 | 77) echo "softroce smoke: run without the guest exited $rc" >&2 ;;
    *) fail "verbs_smoke exited $rc on the host" ;;
  esac
}

run_in_guest() {
  local out rc=0
  out=$(cd "$build_dir" && "$repo/scripts/softroce/run-in-guest.sh" --timeout "$timeout_seconds" \
    ./verbs_smoke 2>&1) || rc=$?
  printf '%s\n' "$out"
  [ "$rc" -eq 0 ] || fail "verbs_smoke exited $rc in the guest"
  grep -Eq "$expected" <<<"$out" || fail "no rxe0 lkey/rkey line in the guest output"
  echo "softroce smoke: PASS" >&2
}

main() {
  parse_args "$@"
  require_qemu
  build
  run_without_guest
  run_in_guest
}

main "$@"
