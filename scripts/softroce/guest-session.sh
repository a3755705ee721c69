#!/usr/bin/env bash
# Runs inside the soft-RoCE guest, chrooted into the host's / (started by guest-init.sh, never by hand).
# Owns the guest's set-up above the kernel: loads the job written by run-in-guest.sh ($RUN_DIR/job:
# job_cwd, job_env, job_argv, and the guest_* settings, as bash variables), sets the host name, reserves
# the huge pages asked for (per node or in total; fewer than asked is a set-up failure), brings up rxe0's
# netdev (dummy0, or the virtio NIC with the MAC in guest_netdev_mac) with guest_addr (10.77.0.1/24 by
# default), adds rxe0 on it, and waits until port 1 is ACTIVE and its GID table holds the IPv4-mapped
# RoCE v2 entry (GID index 1), which the kernel fills asynchronously. Then it writes "ready" to the
# control port and execs the command with a clean environment, stdin from /dev/null, stdout/stderr on
# the pinpool.out/pinpool.err ports.
# Contract: exit status is the command's; 125 means the guest setup failed before the command ran (the
# reason goes to pinpool.err and, as "error=...", to pinpool.ctl).
set -euo pipefail

readonly run_dir=$1
readonly ports=/dev/virtio-ports
readonly ibdev=rxe0
readonly settle_seconds=60
readonly hugepage_kb=2048

log() {
  local up
  read -r up _ </proc/uptime
  echo "[$up] softroce-session: $*" >/dev/console
}

fail() {
  log "FAILED: $*"
  {
    echo "softroce: guest setup failed: $*"
    rdma link show 2>&1 || true
    dmesg 2>/dev/null | tail -n 20 || true
  } >"$ports/pinpool.err"
  echo "error=$*" >"$ports/pinpool.ctl"
  exit 125
}

set_hostname() {
  [ -n "$guest_hostname" ] || return 0
  echo "$guest_hostname" >/proc/sys/kernel/hostname || fail "cannot set the host name $guest_hostname"
}

# Writes one reservation and reads it back: the kernel gives fewer pages than asked when memory is
# short or fragmented, and a test that asked for them must not run without them.
reserve() {
  local file=$1 count=$2 where=$3 got
  echo "$count" >"$file" 2>/dev/null || fail "cannot write $file"
  got=$(cat "$file")
  [ "$got" -eq "$count" ] ||
    fail "reserved $got of $count ${hugepage_kb} kB huge pages $where (guest memory too small?)"
}

reserve_hugepages() {
  local spec node
  [ ${#guest_hugepages[@]} -gt 0 ] || return 0
  if [ ${#guest_hugepages[@]} -eq 1 ] && [[ ${guest_hugepages[0]} != *:* ]]; then
    reserve /proc/sys/vm/nr_hugepages "${guest_hugepages[0]}" "in total"
    return 0
  fi
  for spec in "${guest_hugepages[@]}"; do
    node=${spec%%:*}
    [ -d "/sys/devices/system/node/node$node" ] || fail "no NUMA node $node for huge pages"
    reserve "/sys/devices/system/node/node$node/hugepages/hugepages-${hugepage_kb}kB/nr_hugepages" \
      "${spec#*:}" "on node $node"
  done
}

# Prints the name of the interface with MAC $1 (the virtio NIC; its probe may trail the module load).
netdev_by_mac() {
  local mac=$1 dev _
  for _ in $(seq 50); do
    for dev in /sys/class/net/*; do
      [ "$(cat "$dev/address" 2>/dev/null)" = "$mac" ] && { basename "$dev"; return 0; }
    done
    sleep 0.1
  done
  return 1
}

setup_rxe() {
  local netdev
  ip link set lo up
  if [ -z "$guest_netdev_mac" ]; then
    netdev=dummy0
    # The dummy module creates dummy0 itself (numdummies=1).
    ip link show "$netdev" >/dev/null 2>&1 || ip link add "$netdev" type dummy ||
      fail "ip link add $netdev type dummy"
  else
    netdev=$(netdev_by_mac "$guest_netdev_mac") || fail "no network interface with MAC $guest_netdev_mac"
  fi
  log "adding $ibdev on $netdev ($guest_addr)"
  ip addr add "$guest_addr" dev "$netdev" || fail "ip addr add $guest_addr dev $netdev"
  ip link set "$netdev" up
  rdma link add "$ibdev" type rxe netdev "$netdev" 2>/dev/console ||
    fail "rdma link add $ibdev type rxe netdev $netdev (is crc32_generic loaded?)"
}

# The IPv4-mapped GID of guest_addr as sysfs prints it (::ffff:10.77.0.1 ->
# 0000:0000:0000:0000:0000:ffff:0a4d:0001).
mapped_gid() {
  local a b c d
  IFS=./ read -r a b c d _ <<<"$guest_addr"
  printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n' "$a" "$b" "$c" "$d"
}

port_ready() {
  local port=/sys/class/infiniband/$ibdev/ports/1 want=$1 state gid
  state=$(cat "$port/state" 2>/dev/null) || return 1
  gid=$(cat "$port/gids/1" 2>/dev/null) || return 1
  [[ $state == *ACTIVE* && $gid == "$want" ]]
}

wait_rxe() {
  local i want
  want=$(mapped_gid)
  for ((i = 0; i < settle_seconds * 10; i++)); do
    port_ready "$want" && return 0
    sleep 0.1
  done
  fail "$ibdev port 1 not ACTIVE with GID[1]=$want after ${settle_seconds}s"
}

run_job() {
  local uptime
  cd "$job_cwd" || fail "cannot cd to $job_cwd in the guest"
  # Root may pin without limit anyway (CAP_IPC_LOCK); say so to code that inspects the limit.
  ulimit -l unlimited
  read -r uptime _ </proc/uptime
  echo "ready uptime=$uptime" >"$ports/pinpool.ctl"
  exec env -i "${job_env[@]}" "${job_argv[@]}" </dev/null >"$ports/pinpool.out" 2>"$ports/pinpool.err"
}

main() {
  set_hostname
  reserve_hugepages
  setup_rxe
  wait_rxe
  log "$ibdev ACTIVE"
  run_job
}

# The job's `declare` lines must run at the top level: inside a function they would declare locals.
# Defaults first, for settings the job leaves out: the single-guest layout.
job_cwd=/ job_env=() job_argv=()
guest_netdev_mac='' guest_addr=10.77.0.1/24 guest_hostname='' guest_hugepages=()
# shellcheck source=/dev/null
source "$run_dir/job" || fail "cannot read job $run_dir/job"
main "$@"
