#!/usr/bin/env bash
# The UCX and libfabric domains moving data between two processes on a host without RDMA (ctest
# `providers.host_processes`): the examples pinpool_ucx_transfer and pinpool_fabric_transfer, target
# and initiator as two processes over loopback, every byte checked by both.
#
#   tests/providers/host-processes.sh UCX_TRANSFER|- FABRIC_TRANSFER|-
#
#   1. UCX over tcp (UCX_TLS=tcp): the endpoint's lanes must be tcp;
#   2. UCX over shared memory (UCX_TLS=sm: sysv, posix, cma): the lanes must be shared memory;
#   3. libfabric over tcp (tcp;ofi_rxm), each request through a grant revoked after it.
# Without RDMA, UCX's put/get and tcp's RMA are messages the target must progress: the targets
# keep progressing while they wait (a target that stopped would make these hang, then fail on the
# timeout). A "-" skips that provider (its library was not built).
# Exit status: 0 when every run printed OK on both sides with the expected counts; 1 otherwise.
set -euo pipefail

ucx=${1:?usage: host-processes.sh UCX_TRANSFER|- FABRIC_TRANSFER|-}
fabric=${2:?usage: host-processes.sh UCX_TRANSFER|- FABRIC_TRANSFER|-}
work=$(mktemp -d "${TMPDIR:-/tmp}/pinpool-providers.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=../../scripts/lib/harness.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/harness.sh" host-processes  # sets repo

# A free TCP port on the loopback (the kernel picks one; it is closed again before use).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# run NAME PROGRAM TARGET_ARGS... -- INITIATOR_ARGS...: both sides, outputs in $work/NAME.{t,i}
run() {
  local name=$1 program=$2 port targs=() iargs=() rc=0
  shift 2
  while [ "$1" != -- ]; do targs+=("$1"); shift; done
  shift
  iargs=("$@")
  port=$(free_port)
  timeout 300 "$program" target 127.0.0.1 --port "$port" "${targs[@]}" >"$work/$name.t" 2>&1 &
  local target=$!
  timeout 300 "$program" initiator 127.0.0.1 --port "$port" "${iargs[@]}" >"$work/$name.i" 2>&1 ||
    rc=$?
  wait "$target" || rc=$((rc ? rc : $?))
  sed "s/^/[$name target] /" "$work/$name.t"
  sed "s/^/[$name initiator] /" "$work/$name.i"
  [ "$rc" -eq 0 ] || fail "$name exited $rc"
  grep -q '^target: OK$' "$work/$name.t" || fail "$name: the target did not report OK"
  grep -q '^initiator: OK$' "$work/$name.i" || fail "$name: the initiator did not report OK"
}

if [ "$ucx" != - ]; then
  export UCX_TLS=tcp
  run ucx-tcp "$ucx" --blocks 200 -- --print-lanes
  grep -Eq 'lane\[0\]: +[0-9]+:tcp/' "$work/ucx-tcp.i" || fail "ucx-tcp: the endpoint did not use tcp"
  grep -q '^initiator: 100 puts and 100 gets' "$work/ucx-tcp.i" || fail "ucx-tcp: counts"
  export UCX_TLS=sm
  run ucx-sm "$ucx" --blocks 200 -- --print-lanes
  grep -Eq 'lane\[0\]: +[0-9]+:(sysv|posix|cma)/' "$work/ucx-sm.i" ||
    fail "ucx-sm: the endpoint did not use shared memory"
  grep -q '^initiator: 100 puts and 100 gets' "$work/ucx-sm.i" || fail "ucx-sm: counts"
  unset UCX_TLS
fi
if [ "$fabric" != - ]; then
  run fabric-tcp "$fabric" --provider tcp -- --provider tcp --requests 200
  grep -q 'tcp;ofi_rxm' "$work/fabric-tcp.i" || fail "fabric-tcp: not the tcp provider"
  grep -q '^target: 200 requests served from pool blocks, [0-9]* bytes, 0 with a wrong byte; 200 grants made, 200 revoked, 0 live$' \
    "$work/fabric-tcp.t" || fail "fabric-tcp: the target's counts"
fi
echo "host-processes: PASS"
