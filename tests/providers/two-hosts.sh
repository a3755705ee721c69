#!/usr/bin/env bash
# Two hosts moving data between pool blocks (ctest `rdma.two_hosts`): one boot of two soft-RoCE
# guests (scripts/softroce/run-two-guests.sh), each with its own kernel and rxe0 on its own NIC,
# runs four exchanges in turn, host A serving and host B initiating:
#
#   1. rdma_cm: the block server (examples/rdma_cm_block_server.cc): REQUESTS requests of mixed
#      sizes (1 B - 64 KiB, PUTs and GETs), every byte checked on the side that receives it, a
#      grant per request revoked when it ends (10001 grants made and revoked, none live), and the
#      client's last write through a revoked grant refused by A's device with A's block untouched;
#   2. UCX over rc_verbs (UCX_TLS=rc, UCX_IB_GID_INDEX=0): puts from and gets into pool blocks of
#      both hosts (examples/ucx_transfer.cc), every byte checked by both; the endpoint's lanes must
#      be rc_verbs on rxe0;
#   3. libfabric's verbs provider (verbs;ofi_rxm, FI_UNIVERSE_SIZE=64, FI_MR_CACHE_MAX_COUNT=0):
#      writes and reads between pool blocks through a grant per request
#      (examples/fabric_transfer.cc), every byte checked by both;
#   4. a KV-cache transfer over rdma_cm (examples/kv_cache_transfer.cc): A's cache is one array of
#      3000 pages of 16 KiB in 2 MiB chunks (24 chunk runs), granted read-only, described in one
#      descriptor; B READs lists of pages across runs through it, every byte checked; A rebuilds
#      the cache (a new generation in the same chunks) and B's READs through the old descriptor
#      are refused (remote access error) with nothing of the new generation received.
# It also checks that the two are different hosts (host names, boot ids) and that rxe0's packet
# counters moved on both.
#
#   tests/providers/two-hosts.sh [--timeout SECONDS] [--requests N] RDMA_CM_EXAMPLE UCX_EXAMPLE|-
#                              FABRIC_EXAMPLE|- KV_CACHE_EXAMPLE|-
#
# Exit status: 0 pass; 1 fail (guests that cannot boot included); 77 skip without QEMU unless
# PINPOOL_REQUIRE_RDMA=1, and inside a guest (two more guests cannot start there).
set -euo pipefail

self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
# shellcheck source=../../scripts/lib/harness.sh
source "$(dirname "$self")/../../scripts/lib/harness.sh" "providers two-hosts"  # sets repo
timeout_seconds=900
requests=10000

# --- In a guest ---------------------------------------------------------------------------------


# Host A: the serving side of each exchange, in turn.
serve() {
  local cm=$1 ucx=$2 fabric=$3 kv=$4
  echo "identity: host=$(hostname) boot_id=$(cat /proc/sys/kernel/random/boot_id)"
  rxe_counters before
  echo "== rdma_cm"
  timeout 1200 "$cm" server "$PINPOOL_HOST_ADDR" --port 7471 --clients 1
  if [ "$ucx" != - ]; then
    echo "== ucx"
    UCX_TLS=rc UCX_IB_GID_INDEX=0 timeout 600 "$ucx" target "$PINPOOL_HOST_ADDR" --port 7472 \
      --blocks 200
  fi
  if [ "$fabric" != - ]; then
    echo "== fabric"
    FI_UNIVERSE_SIZE=64 FI_MR_CACHE_MAX_COUNT=0 timeout 600 "$fabric" target "$PINPOOL_HOST_ADDR" \
      --port 7473 --provider verbs
  fi
  if [ "$kv" != - ]; then
    echo "== kv_cache"
    timeout 600 "$kv" server "$PINPOOL_HOST_ADDR" --port 7474 --pages 3000 --page-size 16384 \
      --chunk-size 2097152
  fi
  rxe_counters after
}

# Host B: the initiating side; each client retries until A listens (A may still be busy with the
# previous exchange, or booting).
connect() {
  local cm=$1 ucx=$2 fabric=$3 kv=$4 n=$5
  echo "identity: host=$(hostname) boot_id=$(cat /proc/sys/kernel/random/boot_id)"
  rxe_counters before
  local t=$SECONDS
  echo "== rdma_cm"
  timeout 1200 "$cm" client "$PINPOOL_PEER_ADDR" --port 7471 --requests "$n" --depth 8 \
    --connect-seconds 300
  echo "took: rdma_cm $((SECONDS - t)) s (connecting included)"
  if [ "$ucx" != - ]; then
    t=$SECONDS
    echo "== ucx"
    UCX_TLS=rc UCX_IB_GID_INDEX=0 timeout 600 "$ucx" initiator "$PINPOOL_PEER_ADDR" --port 7472 \
      --print-lanes
    echo "took: ucx $((SECONDS - t)) s"
  fi
  if [ "$fabric" != - ]; then
    t=$SECONDS
    echo "== fabric"
    FI_UNIVERSE_SIZE=64 FI_MR_CACHE_MAX_COUNT=0 timeout 600 "$fabric" initiator \
      "$PINPOOL_PEER_ADDR" --port 7473 --provider verbs --requests 200
    echo "took: fabric $((SECONDS - t)) s"
  fi
  if [ "$kv" != - ]; then
    t=$SECONDS
    echo "== kv_cache"
    timeout 600 "$kv" client "$PINPOOL_PEER_ADDR" --port 7474 --lists 16 --list-size 64
    echo "took: kv_cache $((SECONDS - t)) s"
  fi
  rxe_counters after
}

# --- On the host --------------------------------------------------------------------------------


# expect HOST REGEX WHAT: a line of HOST's output matches REGEX (extended), else fail.
expect() {
  grep -Eq "^\[$1\] $2" <<<"$out" || fail "$1: $3 (no line matching: $2)"
}

# Prints "SENT RCVD" moved on host $1.

check_output() {
  local a=pinpool-a b=pinpool-b sent rcvd counts
  # 1. rdma_cm
  expect $a "server: client 0 connected from 10\.88\.0\.2; grants are region \(range enforced\)" \
    "the client did not connect from host B"
  expect $a "server: client 0: $requests requests served, [0-9]+ bytes, 0 with wrong bytes; $((requests + 1)) grants made, $((requests + 1)) revoked, 0 live; canary block untouched after the client's stale write$" \
    "the server's counts"
  expect $a "server: OK: client 0$" "the server did not report OK"
  expect $b "client: $requests requests \([0-9]+ PUT, [0-9]+ GET\), [0-9]+ bytes, every byte checked" \
    "the client's counts"
  expect $b "client: stale WRITE through the revoked grant: remote access error$" \
    "the stale write was not refused"
  expect $b "client: OK$" "the client did not report OK"
  # 2. UCX
  if [ "$ucx" != - ]; then
    expect $b "# +lane\[0\]: +[0-9]+:rc_verbs/rxe0:1" "UCX did not use rc_verbs on rxe0"
    expect $b "initiator: 100 puts and 100 gets between pool blocks" "UCX initiator counts"
    expect $b "initiator: OK$" "the UCX initiator did not report OK"
    expect $a "target: 100 blocks written by the peer, [0-9]+ bytes, 0 with a wrong byte$" \
      "the UCX target's check"
    expect $a "target: OK$" "the UCX target did not report OK"
  fi
  # 3. libfabric
  if [ "$fabric" != - ]; then
    expect $b "initiator: fabric[0-9]+/verbs;ofi_rxm/rxe0: [0-9]+ writes and [0-9]+ reads" \
      "libfabric did not use verbs;ofi_rxm on rxe0"
    expect $a "target: 200 requests served from pool blocks, [0-9]+ bytes, 0 with a wrong byte; 200 grants made, 200 revoked, 0 live$" \
      "the libfabric target's counts"
    [ "$(grep -c "^\[pinpool-[ab]\] \(target\|initiator\): OK$" <<<"$out")" -ge 2 ] ||
      fail "the libfabric sides did not both report OK"
  fi
  # 4. KV cache
  if [ "$kv" != - ]; then
    expect $a "kv_cache server: generation 1: 3000 pages of 16384 B in 24 chunk runs \(chunks of 2048 KiB\), 24 read-only grants \(region, range enforced\)" \
      "the KV cache was not one array of 24 runs with a grant each"
    expect $b "kv_cache client: descriptor of generation 1: 3000 pages of 16384 B in 24 runs, 1000 bytes" \
      "the client's descriptor is not 24 runs in 1000 bytes"
    expect $b "kv_cache client: generation 1: 16 lists, 1024 pages from [0-9]+ of 24 chunk runs read \([1-9][0-9]* run boundaries crossed\), every byte checked$" \
      "the client's generation 1 reads"
    expect $a "kv_cache server: generation 1 freed \(every grant ended, no run held\); generation 2 reuses [1-9][0-9]* of its 24 chunks$" \
      "generation 2 did not reuse generation 1's chunks"
    expect $b "kv_cache client: generation 2: 16 lists, 1024 pages from [0-9]+ of 24 chunk runs read \([1-9][0-9]* run boundaries crossed\), every byte checked$" \
      "the client's generation 2 reads"
    expect $b "kv_cache client: 8 READs through the generation 1 descriptor at pages whose memory now holds generation 2 pages \(in [0-9]+ old chunk runs\): first completion: remote access error; [1-8] refused with a remote access error, 0 returned data, 0 local pages changed, 0 hold generation 2 bytes$" \
      "the stale descriptor was not refused"
    expect $a "kv_cache server: 32 lists served, 2048 pages read by the client, 0 lists refused; client's stale READs: [1-8] refused, 0 returned data$" \
      "the KV server's counts"
    expect $a "kv_cache: OK: server$" "the KV server did not report OK"
    expect $b "kv_cache: OK: client$" "the KV client did not report OK"
  fi
  # Two hosts, and the traffic crossed the link.
  local ida idb
  ida=$(sed -n "s/^\[$a\] identity: //p" <<<"$out")
  idb=$(sed -n "s/^\[$b\] identity: //p" <<<"$out")
  [ -n "$ida" ] && [ -n "$idb" ] || fail "a host printed no identity"
  [ "${ida#*boot_id=}" != "${idb#*boot_id=}" ] || fail "both hosts have one boot id: one kernel"
  for host in $a $b; do
    counts=$(rxe_moved "$out" "$host") || exit 1
    read -r sent rcvd <<<"$counts"
    [ "$sent" -gt "$requests" ] && [ "$rcvd" -gt "$requests" ] ||
      fail "$host's rxe0 moved too few packets (sent $sent, received $rcvd)"
    echo "providers two-hosts: $host's rxe0 sent $sent and received $rcvd packets" >&2
  done
}

main() {
  local rc=0 args=()
  case ${1:-} in
    --serve) shift; serve "$@"; return 0 ;;
    --connect) shift; connect "$@"; return 0 ;;
  esac
  while [ $# -gt 0 ]; do
    case $1 in
      --timeout) timeout_seconds=$2; shift 2 ;;
      --requests) requests=$2; shift 2 ;;
      *) args+=("$1"); shift ;;
    esac
  done
  [ ${#args[@]} -eq 4 ] ||
    fail "usage: $0 [--timeout S] [--requests N] RDMA_CM_EXAMPLE UCX_EXAMPLE|- FABRIC_EXAMPLE|- KV_CACHE_EXAMPLE|-"
  cm=${args[0]} ucx=${args[1]} fabric=${args[2]} kv=${args[3]}
  require_qemu "two guests start from the host"
  cd "$repo"  # the guests see the host's / at the same paths, but not its /tmp writes
  local start=$SECONDS
  out=$("$repo/scripts/softroce/run-two-guests.sh" --timeout "$timeout_seconds" -- \
    "$(printf '%q --serve %q %q %q %q' "$self" "$cm" "$ucx" "$fabric" "$kv")" -- \
    "$(printf '%q --connect %q %q %q %q %q' "$self" "$cm" "$ucx" "$fabric" "$kv" "$requests")" \
    2>&1) || rc=$?
  printf '%s\n' "$out"
  [ "$rc" -eq 0 ] || fail "run-two-guests.sh exited $rc"
  check_output
  echo "providers two-hosts: PASS in $((SECONDS - start)) s" >&2
}

main "$@"
