#!/usr/bin/env bash
# Proves the soft-RoCE guest's NUMA mode (ctest `softroce.numa`): boots two guests in turn with
# PINPOOL_VM_NUMA=2 and checks inside each that
#   - the kernel sees 2 nodes, one vCPU each (numactl -H, /sys/devices/system/node), without the
#     topology warnings a socket split over nodes causes;
#   - the huge pages asked for are reserved where asked (per node, or in total);
#   - rxe0 is ACTIVE with the IPv4-mapped GID of its address, and its node, resolved the way a program
#     must (rxe0 -> its `parent` netdev -> the first sysfs ancestor with a numa_node), is the one asked
#     for: node 1 with PINPOOL_VM_NIC_NODE=1 (virtio NIC behind a PCI expander bridge), none on dummy0;
#   - an rdma_cm connection over rxe0 moves data (rping to itself).
#
#   tests/softroce/numa.sh [--timeout SECONDS]
#
# Exit status: 0 pass; 1 fail (including a guest that cannot boot); 77 skip when this machine has no
# QEMU (run scripts/setup-vm-deps.sh) unless PINPOOL_REQUIRE_RDMA=1, and inside a guest already
# (PINPOOL_SOFTROCE=1), where the topology is the running guest's and cannot be chosen.
set -euo pipefail

self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
# shellcheck source=../../scripts/lib/harness.sh
source "$(dirname "$self")/../../scripts/lib/harness.sh" "softroce numa"  # sets repo
timeout_seconds=300

# --- In the guest -------------------------------------------------------------------------------

# Prints the NUMA node of RDMA device $1, or "none": rxe devices have no device link of their own, so
# go through the netdev they sit on, up to the first ancestor that has a numa_node (the virtio device
# itself has none; its PCI function does). -1 (no node known) counts as none.
device_node() {
  local netdev dir node
  netdev=$(cat "/sys/class/infiniband/$1/parent")
  dir=$(readlink -f "/sys/class/net/$netdev/device" 2>/dev/null) || { echo none; return 0; }
  while [ "$dir" != /sys ] && [ "$dir" != / ] && [ ! -e "$dir/numa_node" ]; do dir=${dir%/*}; done
  node=$(cat "$dir/numa_node" 2>/dev/null || echo -1)
  if [ "$node" -lt 0 ]; then echo none; else echo "$node"; fi
}

hugepages_of() {
  cat "/sys/devices/system/node/node$1/hugepages/hugepages-2048kB/nr_hugepages"
}

# rping to itself over rxe0 (the server in the background): rdma_cm resolves the address, connects an
# RC QP and moves data through the provider.
rping_self() {
  local addr=$PINPOOL_HOST_ADDR server rc=0 i
  timeout 120 rping -s -a "$addr" -C 3 >/tmp/rping-server.log 2>&1 &
  server=$!
  for i in $(seq 30); do
    rc=0
    timeout 60 rping -c -a "$addr" -C 3 -v >/tmp/rping-client.log 2>&1 || rc=$?
    [ "$rc" -ne 0 ] || break
    sleep 1
  done
  wait "$server" || fail "rping server exited $? ($(cat /tmp/rping-server.log))"
  [ "$rc" -eq 0 ] || fail "rping client exited $rc after $i tries ($(cat /tmp/rping-client.log))"
  [ "$(grep -c 'ping data: rdma-ping-' /tmp/rping-client.log)" -eq 3 ] ||
    fail "rping client did not get 3 pings: $(cat /tmp/rping-client.log)"
}

# Checks the running guest against: node count, rxe0's expected node ("none" for dummy0), expected
# huge pages ("N" in total or "NODE:COUNT,..."; "" for none).
check_guest() {
  local nodes=$1 want_node=$2 want_huge=$3 out node parent got spec specs gid want_gid a b c d
  out=$(numactl -H)
  printf '%s\n' "$out"
  grep -qx "available: $nodes nodes (0-$((nodes - 1)))" <<<"$out" ||
    fail "numactl -H does not report $nodes nodes"
  for ((node = 0; node < nodes; node++)); do
    grep -qx "node $node cpus: $node" <<<"$out" || fail "node $node does not have cpu $node alone"
  done
  got=$(find /sys/devices/system/node -maxdepth 1 -name 'node[0-9]*' | wc -l)
  [ "$got" -eq "$nodes" ] || fail "/sys/devices/system/node has $got nodes, expected $nodes"
  if dmesg | grep -E 'topology_sane|llc-sibling'; then
    fail "the kernel warned about the CPU topology"
  fi

  if [[ $want_huge == *:* ]]; then
    IFS=, read -ra specs <<<"$want_huge"
    for spec in "${specs[@]}"; do
      got=$(hugepages_of "${spec%%:*}")
      [ "$got" = "${spec#*:}" ] || fail "node ${spec%%:*} has $got huge pages, asked ${spec#*:}"
    done
  elif [ -n "$want_huge" ]; then
    got=$(cat /proc/sys/vm/nr_hugepages)
    [ "$got" = "$want_huge" ] || fail "$got huge pages in total, asked $want_huge"
  fi

  parent=$(cat /sys/class/infiniband/rxe0/parent)
  node=$(device_node rxe0)
  IFS=. read -r a b c d <<<"$PINPOOL_HOST_ADDR"
  want_gid=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d")
  gid=$(cat /sys/class/infiniband/rxe0/ports/1/gids/1)
  [ "$gid" = "$want_gid" ] || fail "rxe0 GID[1] is $gid, expected $want_gid ($PINPOOL_HOST_ADDR)"
  grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state || fail "rxe0 port 1 is not ACTIVE"
  if [ "$want_node" = none ]; then
    [ "$parent" = dummy0 ] || fail "rxe0 sits on $parent, expected dummy0"
  else
    [ "$parent" != dummy0 ] || fail "rxe0 sits on dummy0, expected the virtio NIC"
  fi
  [ "$node" = "$want_node" ] || fail "rxe0 (on $parent) resolves to node $node, expected $want_node"
  rping_self
  echo "softroce numa: guest has $nodes nodes; rxe0 on $parent ($PINPOOL_HOST_ADDR) node $node;" \
    "huge pages$(for ((node = 0; node < nodes; node++)); do printf ' node%d=%s' "$node" \
      "$(hugepages_of "$node")"; done); rping OK"
}

# --- On the host --------------------------------------------------------------------------------

# Boots one guest with the given PINPOOL_VM_* settings and runs check_guest in it.
boot_and_check() {
  local node=$1 huge=$2 rc=0
  shift 2
  echo "softroce numa: booting with $*" >&2
  env "$@" "$repo/scripts/softroce/run-in-guest.sh" --timeout "$timeout_seconds" -- \
    "$self" --in-guest 2 "$node" "$huge" || rc=$?
  [ "$rc" -eq 0 ] || fail "the guest with $* exited $rc"
}

main() {
  if [ "${1:-}" = --in-guest ]; then
    shift
    check_guest "$@"
    return 0
  fi
  while [ $# -gt 0 ]; do
    case $1 in
      --timeout) timeout_seconds=$2; shift 2 ;;
      *) fail "usage: $0 [--timeout SECONDS]" ;;
    esac
  done
  require_qemu "its NUMA layout is not this test's to choose"
  # The guest sees the host's / at the same paths, but not the host's /tmp writes: run from the repo.
  cd "$repo"
  boot_and_check 1 0:1,1:3 PINPOOL_VM_NUMA=2 PINPOOL_VM_NIC_NODE=1 PINPOOL_VM_HUGEPAGES=0:1,1:3
  boot_and_check none 4 PINPOOL_VM_NUMA=2 PINPOOL_VM_HUGEPAGES=4
  echo "softroce numa: PASS" >&2
}

main "$@"
