#!/usr/bin/env bash
# Runs inside the soft-RoCE guest, chrooted into the host's / (started by guest-init.sh, never by hand).
# Owns the RDMA side of the guest: brings up dummy0 with 10.77.0.1/24, adds rxe0 on it, and waits until
# port 1 is ACTIVE and its GID table holds the IPv4-mapped RoCE v2 entry (GID index 1), which the kernel
# fills asynchronously. Then it loads the job written by run-in-guest.sh ($RUN_DIR/job: job_cwd,
# job_env, job_argv as bash arrays), writes "ready" to the control port and execs the command with a
# clean environment, stdin from /dev/null, stdout/stderr on the pinpool.out/pinpool.err ports.
# Contract: exit status is the command's; 125 means the guest setup failed before the command ran (the
# reason goes to pinpool.err and, as "error=...", to pinpool.ctl).
set -euo pipefail

readonly run_dir=$1
readonly ports=/dev/virtio-ports
readonly netdev=dummy0
readonly address=10.77.0.1/24
readonly ibdev=rxe0
# ::ffff:10.77.0.1, as sysfs prints it.
readonly mapped_gid=0000:0000:0000:0000:0000:ffff:0a4d:0001
readonly settle_seconds=60

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

setup_rxe() {
  ip link set lo up
  # The dummy module creates dummy0 itself (numdummies=1).
  ip link show "$netdev" >/dev/null 2>&1 || ip link add "$netdev" type dummy ||
    fail "ip link add $netdev type dummy"
  ip addr add "$address" dev "$netdev"
  ip link set "$netdev" up
  rdma link add "$ibdev" type rxe netdev "$netdev" 2>/dev/console ||
    fail "rdma link add $ibdev type rxe netdev $netdev (is crc32_generic loaded?)"
}

port_ready() {
  local port=/sys/class/infiniband/$ibdev/ports/1 state gid
  state=$(cat "$port/state" 2>/dev/null) || return 1
  gid=$(cat "$port/gids/1" 2>/dev/null) || return 1
  [[ $state == *ACTIVE* && $gid == "$mapped_gid" ]]
}

wait_rxe() {
  local i
  for ((i = 0; i < settle_seconds * 10; i++)); do
    port_ready && return 0
    sleep 0.1
  done
  fail "$ibdev port 1 not ACTIVE with GID[1]=$mapped_gid after ${settle_seconds}s"
}

run_job() {
  local job_cwd job_env job_argv uptime
  # shellcheck source=/dev/null
  source "$run_dir/job" || fail "cannot read job $run_dir/job"
  cd "$job_cwd" || fail "cannot cd to $job_cwd in the guest"
  # Root may pin without limit anyway (CAP_IPC_LOCK); say so to code that inspects the limit.
  ulimit -l unlimited
  read -r uptime _ </proc/uptime
  echo "ready uptime=$uptime" >"$ports/pinpool.ctl"
  exec env -i "${job_env[@]}" "${job_argv[@]}" </dev/null >"$ports/pinpool.out" 2>"$ports/pinpool.err"
}

main() {
  log "adding $ibdev"
  setup_rxe
  wait_rxe
  log "$ibdev ACTIVE"
  run_job
}

main "$@"
