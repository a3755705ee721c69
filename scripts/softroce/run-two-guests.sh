#!/usr/bin/env bash
# Runs a command on each of two soft-RoCE guests joined by a virtual Ethernet link, so that two
# processes talk as two real hosts through two kernels' RDMA stacks (rdma_cm, RC QPs, ...).
#
#   run-two-guests.sh [--timeout SECONDS] [--env NAME[=VALUE]]... [--] 'COMMAND ON A' [--] 'COMMAND ON B'
#
# Host A is pinpool-a, 10.88.0.1/24; host B is pinpool-b, 10.88.0.2/24. Each guest is one
# run-in-guest.sh with its own kernel, a virtio NIC with rxe0 on it (1 vCPU, 1024 MiB unless
# PINPOOL_VM_CPUS / PINPOOL_VM_MEMORY say otherwise); the two NICs are the ends of a QEMU unix-socket
# stream. A listens, so A's QEMU starts first and B's once A's socket exists; B's command may thus start
# before A's, and a client on B must retry until A's server listens. Each COMMAND is run by `bash -c` in
# its guest, as run-in-guest.sh runs commands, with PINPOOL_HOST_NAME, PINPOOL_HOST_ADDR,
# PINPOOL_PEER_NAME and PINPOOL_PEER_ADDR set (plus each --env, given to both).
# Output: each guest's stdout and stderr stream back as they come, every line prefixed with its host
# name ("[pinpool-a] ..."); a last line on stderr says how each ended.
# Exit status: 0 when both commands exit 0. Otherwise the status of the first guest to fail (its
# command's, or 124 timeout / 125 harness or boot failure, as run-in-guest.sh reports them); the other
# guest is then stopped, since a server or a client whose peer is gone would wait until its timeout.
# --timeout (default 600 s) applies to each guest, boot included.
# Invariant: each QEMU belongs to its run-in-guest.sh, which stops it on every exit path; this script
# stops both of those on every exit path of its own (end, failure, INT, TERM, HUP) and waits for them.
# Other PINPOOL_VM_* knobs (docs/softroce.md) apply to both guests; PINPOOL_VM_LINK, PINPOOL_VM_ADDR,
# PINPOOL_VM_HOSTNAME and PINPOOL_VM_NIC are this script's.
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly script_dir
readonly run_in_guest=$script_dir/run-in-guest.sh
readonly names=(pinpool-a pinpool-b)
readonly addrs=(10.88.0.1 10.88.0.2)
readonly prefix_len=24

timeout_seconds=600
extra_env=()
commands=()
pair_dir=
guest_pids=()
prefix_pids=()
status=()
first_failure=0

log() { echo "softroce: $*" >&2; }

usage() {
  sed -n '5p' "${BASH_SOURCE[0]}" | sed 's/^#   //' >&2
  exit 125
}

die() {
  log "$*"
  exit 125
}

parse_args() {
  while [ $# -gt 0 ]; do
    case $1 in
      --timeout) [ $# -ge 2 ] || usage; timeout_seconds=$2; shift 2 ;;
      --timeout=*) timeout_seconds=${1#*=}; shift ;;
      --env) [ $# -ge 2 ] || usage; extra_env+=(--env "$2"); shift 2 ;;
      -h | --help) usage ;;
      --) shift; break ;;
      -*) log "unknown option $1"; usage ;;
      *) break ;;
    esac
  done
  [[ $timeout_seconds =~ ^[1-9][0-9]*$ ]] || die "--timeout needs a positive number of seconds"
  [ $# -ge 1 ] || usage
  commands=("$1")
  shift
  [ "${1:-}" != -- ] || shift
  [ $# -eq 1 ] || usage
  commands+=("$1")
}

# Starts guest $1 (0 = A, 1 = B) in the background, its output through two prefixing readers.
start_guest() {
  local i=$1 peer=$((1 - $1)) link name=${names[$1]}
  if [ "$i" -eq 0 ]; then link=listen:$pair_dir/link; else link=connect:$pair_dir/link; fi
  mkfifo "$pair_dir/$name.out" "$pair_dir/$name.err"
  sed -u "s/^/[$name] /" <"$pair_dir/$name.out" &
  prefix_pids+=($!)
  sed -u "s/^/[$name] /" <"$pair_dir/$name.err" >&2 &
  prefix_pids+=($!)
  PINPOOL_VM_LINK=$link PINPOOL_VM_ADDR=${addrs[$i]}/$prefix_len PINPOOL_VM_HOSTNAME=$name \
    PINPOOL_VM_NIC=virtio \
    PINPOOL_VM_CPUS=${PINPOOL_VM_CPUS:-1} PINPOOL_VM_MEMORY=${PINPOOL_VM_MEMORY:-1024} \
    "$run_in_guest" --timeout "$timeout_seconds" "${extra_env[@]}" \
    --env "PINPOOL_HOST_NAME=$name" --env "PINPOOL_PEER_NAME=${names[$peer]}" \
    --env "PINPOOL_PEER_ADDR=${addrs[$peer]}" \
    -- bash -c "${commands[$i]}" >"$pair_dir/$name.out" 2>"$pair_dir/$name.err" &
  guest_pids[i]=$!
}

# A's QEMU creates the listening socket as it starts, before its guest boots. B's QEMU (7.2) connects
# once, as it starts: with nobody listening it boots anyway, silently, with a NIC that never carries a
# packet. Returns non-zero when A ended (or never listened) instead.
wait_for_listener() {
  local deadline=$((SECONDS + timeout_seconds))
  while [ ! -S "$pair_dir/link" ]; do
    kill -0 "${guest_pids[0]}" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}

# Stops the guests still running (their run-in-guest.sh stops its QEMU on TERM), waits for them and for
# the prefixing readers (bounded: a reader whose writer was SIGKILLed would wait for the writer's
# orphans), and removes the pair directory. Only pids not yet reaped are signalled.
cleanup() {
  local pid i _
  trap '' INT TERM HUP
  for i in "${!guest_pids[@]}"; do
    kill -TERM "${guest_pids[i]}" 2>/dev/null || true
  done
  for i in "${!guest_pids[@]}"; do
    wait "${guest_pids[i]}" 2>/dev/null || true
  done
  for _ in $(seq 100); do
    for pid in "${prefix_pids[@]}"; do
      kill -0 "$pid" 2>/dev/null && { sleep 0.1; continue 2; }
    done
    break
  done
  for pid in "${prefix_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  [ -z "$pair_dir" ] || rm -rf "$pair_dir"
}

# Waits for the guests started; when one fails, stops the other. Sets status[i] (the guest's exit
# status as "exit N", or "stopped" when this script stopped it) and first_failure (0 when none failed).
collect() {
  local pid rc i
  while [ ${#guest_pids[@]} -gt 0 ]; do
    rc=0
    pid=
    wait -n -p pid "${guest_pids[@]}" || rc=$?
    [ -n "$pid" ] || break
    for i in "${!guest_pids[@]}"; do
      [ "${guest_pids[i]}" = "$pid" ] || continue
      unset 'guest_pids[i]'
      if [ -n "${status[i]:-}" ]; then continue; fi
      status[i]="exit $rc"
      if [ "$rc" -ne 0 ] && [ "$first_failure" -eq 0 ]; then
        first_failure=$rc
        if [ -n "${guest_pids[1 - i]:-}" ]; then
          status[1 - i]=stopped
          kill -TERM "${guest_pids[1 - i]}" 2>/dev/null || true
        fi
      fi
    done
  done
}

main() {
  parse_args "$@"
  [ "${PINPOOL_SOFTROCE:-0}" != 1 ] ||
    die "already inside a soft-RoCE guest: two guests must be started from the host"
  trap cleanup EXIT
  trap 'log "interrupted: stopping both guests"; exit 130' INT
  trap 'log "terminated: stopping both guests"; exit 143' TERM
  trap 'log "hung up: stopping both guests"; exit 129' HUP
  # Build the image once, before two guests would wait for each other's build on its lock.
  "$run_in_guest" --prepare >/dev/null || exit 125
  pair_dir=$(mktemp -d "${TMPDIR:-/tmp}/softroce-pair.XXXXXX")
  # sun_path holds 107 bytes and a NUL.
  [ ${#pair_dir} -le 100 ] || die "TMPDIR is too long a path for a unix socket: $pair_dir"
  start_guest 0
  if wait_for_listener; then
    start_guest 1
  else
    status[1]="never started"
    first_failure=125
    if kill -0 "${guest_pids[0]}" 2>/dev/null; then
      log "${names[0]}'s QEMU did not create $pair_dir/link"
      status[0]=stopped
      kill -TERM "${guest_pids[0]}"
    fi
  fi
  collect
  log "${names[0]}: ${status[0]:-?}; ${names[1]}: ${status[1]:-?}"
  return "$first_failure"
}

main "$@"
