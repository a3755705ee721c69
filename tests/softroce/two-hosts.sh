#!/usr/bin/env bash
# Proves the soft-RoCE two-guest mode (ctest `softroce.two_hosts`): scripts/softroce/run-two-guests.sh
# boots pinpool-a and pinpool-b, A runs an rping server on its address, B an rping client to A (retrying
# until A listens), 10 pings with data checked by rping. Then, from the prefixed output, it checks that
#   - both ended 0 and each side pinged 10 times;
#   - the two are different hosts: different host names, kernels (boot_id), rxe0 node GUIDs and MACs,
#     each with the address it was told (PINPOOL_HOST_ADDR) and the other's as PINPOOL_PEER_ADDR;
#   - the traffic crossed the link: rxe0's sent and received packet counters moved on both.
#
#   tests/softroce/two-hosts.sh [--timeout SECONDS]
#
# Exit status: 0 pass; 1 fail (including guests that cannot boot); 77 skip when this machine has no
# QEMU (run scripts/setup-vm-deps.sh) unless PINPOOL_REQUIRE_RDMA=1, and inside a guest already
# (PINPOOL_SOFTROCE=1), where two more guests cannot be started.
set -euo pipefail

self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
# shellcheck source=../../scripts/lib/harness.sh
source "$(dirname "$self")/../../scripts/lib/harness.sh" "softroce two-hosts"  # sets repo
readonly pings=10
readonly names=(pinpool-a pinpool-b)
readonly addrs=(10.88.0.1 10.88.0.2)
timeout_seconds=300

# --- In a guest ---------------------------------------------------------------------------------

# One line that names this host; the host side compares A's with B's.
identity() {
  local parent
  parent=$(cat /sys/class/infiniband/rxe0/parent)
  echo "identity: host=$(cat /proc/sys/kernel/hostname) boot_id=$(cat /proc/sys/kernel/random/boot_id)" \
    "guid=$(cat /sys/class/infiniband/rxe0/node_guid) netdev=$parent" \
    "mac=$(cat "/sys/class/net/$parent/address") addr=$PINPOOL_HOST_ADDR peer=$PINPOOL_PEER_ADDR" \
    "name=$PINPOOL_HOST_NAME peer_name=$PINPOOL_PEER_NAME"
}

serve() {
  identity
  rxe_counters before
  timeout 240 rping -s -a "$PINPOOL_HOST_ADDR" -C "$pings" -v
  rxe_counters after
}

# The server may not listen yet: B's guest can be ready before A's. A refused connection returns at
# once; retry for up to a minute.
connect() {
  local i
  identity
  rxe_counters before
  for i in $(seq 60); do
    timeout 120 rping -c -a "$PINPOOL_PEER_ADDR" -C "$pings" -v && break
    [ "$i" -lt 60 ] || fail "rping client failed 60 times"
    sleep 1
  done
  rxe_counters after
}

# --- On the host --------------------------------------------------------------------------------

# Prints field $2 (key=value) of host $1's identity line in $out.
field() {
  sed -n "s/^\[$1\] identity: .*\<$2=\([^ ]*\).*/\1/p" <<<"$out" | head -n 1
}

# Fails unless field $2 of host $1 is $3 ($4 names it in the message).
expect() {
  local got
  got=$(field "$1" "$2")
  [ "$got" = "$3" ] || fail "$1: $4 is '$got', expected '$3'"
}

# Prints "SENT RCVD" moved on host $1 between its before: and after: lines.
check_output() {
  local i name other value counts sent rcvd
  for i in 0 1; do
    name=${names[i]} other=${names[1 - i]}
    grep -q "^\[$name\] identity: " <<<"$out" || fail "$name printed no identity line"
    expect "$name" host "$name" "its host name"
    expect "$name" name "$name" "PINPOOL_HOST_NAME"
    expect "$name" peer_name "$other" "PINPOOL_PEER_NAME"
    expect "$name" addr "${addrs[i]}" "PINPOOL_HOST_ADDR"
    expect "$name" peer "${addrs[1 - i]}" "PINPOOL_PEER_ADDR"
    [ "$(field "$name" netdev)" != dummy0 ] || fail "$name's rxe0 sits on dummy0, not on its NIC"
    value=$(grep -c "^\[$name\] .*ping data: rdma-ping-" <<<"$out" || true)
    [ "$value" -eq "$pings" ] || fail "$name saw $value pings, expected $pings"
    counts=$(rxe_moved "$out" "$name") || exit 1
    read -r sent rcvd <<<"$counts"
    if [ "$sent" -le 0 ] || [ "$rcvd" -le 0 ]; then
      fail "$name's rxe0 counters did not move (sent $sent, received $rcvd)"
    fi
    echo "softroce two-hosts: $name guid $(field "$name" guid) on $(field "$name" netdev)" \
      "$(field "$name" mac), rxe0 sent $sent and received $rcvd packets" >&2
  done
  for value in boot_id guid mac; do
    [ "$(field "${names[0]}" $value)" != "$(field "${names[1]}" $value)" ] ||
      fail "both hosts have the same $value $(field "${names[0]}" $value): one kernel, not two"
  done
}

main() {
  local rc=0
  case ${1:-} in
    --serve) serve; return 0 ;;
    --connect) connect; return 0 ;;
  esac
  while [ $# -gt 0 ]; do
    case $1 in
      --timeout) timeout_seconds=$2; shift 2 ;;
      *) fail "usage: $0 [--timeout SECONDS]" ;;
    esac
  done
  require_qemu "two guests start from the host"
  # The guests see the host's / at the same paths, but not the host's /tmp writes: run from the repo.
  cd "$repo"
  out=$("$repo/scripts/softroce/run-two-guests.sh" --timeout "$timeout_seconds" -- \
    "$(printf '%q --serve' "$self")" -- "$(printf '%q --connect' "$self")" 2>&1) || rc=$?
  printf '%s\n' "$out"
  [ "$rc" -eq 0 ] || fail "run-two-guests.sh exited $rc"
  check_output
  echo "softroce two-hosts: PASS" >&2
}

main "$@"
