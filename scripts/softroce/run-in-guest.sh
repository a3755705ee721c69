#!/usr/bin/env bash
# Runs one command inside a throwaway QEMU guest that has a real kernel RDMA provider: soft-RoCE (rxe0
# on dummy0, 10.77.0.1/24, by default), on Debian's linux-image-amd64 kernel, for hosts whose kernel has
# no RDMA.
#
#   run-in-guest.sh [--timeout SECONDS] [--env NAME[=VALUE]]... [--] COMMAND [ARG]...
#   run-in-guest.sh --check      # ibv_devices, ibv_devinfo -d rxe0 in the guest: rxe0 PORT_ACTIVE?
#   run-in-guest.sh --prepare    # only fetch the kernel and build the cached boot image
#
# The guest's root is the host's / over virtio-9p (read-write, same paths), so host-built binaries and
# the host's libibverbs run unchanged; the guest's /tmp shows the host's /tmp through an overlay
# whose writes stay in the guest (9p has no FIFOs or sockets), and /dev/shm is a tmpfs.
# COMMAND runs as root in the caller's working directory with a clean environment (PATH, HOME, LANG,
# TMPDIR, PINPOOL_SOFTROCE=1, PINPOOL_HOST_ADDR=rxe0's IPv4 address, plus each --env), stdin from
# /dev/null; its stdout and stderr stream back as it runs.
# A boot that does not reach the command within PINPOOL_VM_BOOT_SECONDS (default 180) is stopped and
# tried once more (the command runs at most once).
# Exit status: COMMAND's; 124 if --timeout (default 600 s, boot included) expired; 125 if the harness or
# the guest failed before COMMAND ran (the guest console tail is printed).
# Inside the guest (PINPOOL_SOFTROCE=1) it just runs COMMAND under the timeout, without a nested guest.
# Invariant: QEMU always runs under `timeout` and the EXIT trap (also run on INT, TERM, HUP) kills it, so
# no QEMU outlives this script; even if this script is SIGKILLed, `timeout` ends QEMU after --timeout.
# COMMAND also gets RLIMIT_MEMLOCK unlimited.
# Environment: PINPOOL_VM_CACHE (default ~/.cache/pinpool-softroce), PINPOOL_VM_ACCEL (tcg|kvm, default
# tcg: KVM must be proven to boot on the machine), PINPOOL_VM_CPUS (2), PINPOOL_VM_MEMORY (2048, MiB),
# PINPOOL_VM_9P_CACHE (loose: fast, guest may not see host edits made while it runs; mmap: coherent,
# host programs start 5-10x slower), PINPOOL_VM_VERBOSE=1 (timings, console log path),
# PINPOOL_VM_KEEP=1 (keep the run directory).
# Guest topology (docs/softroce.md): PINPOOL_VM_NUMA=N (N emulated NUMA nodes, one socket each; CPUs and
# memory split evenly), PINPOOL_VM_NIC=virtio (rxe0 on a virtio NIC instead of dummy0; an isolated one
# unless PINPOOL_VM_LINK), PINPOOL_VM_NIC_NODE=N (that NIC behind a PCI expander bridge on node N),
# PINPOOL_VM_HUGEPAGES=COUNT|NODE:COUNT[,NODE:COUNT]... (2 MiB hugetlb pages reserved before COMMAND),
# PINPOOL_VM_ADDR=A.B.C.D/P (rxe0's netdev address), PINPOOL_VM_HOSTNAME, and
# PINPOOL_VM_LINK=listen:SOCKET|connect:SOCKET (the NIC is one end of a unix-socket link to another
# guest; run-two-guests.sh sets these).
# Image building is in guest-image.sh, the guest side in guest-init.sh and guest-session.sh.
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly script_dir
# shellcheck source=scripts/softroce/guest-image.sh
source "$script_dir/guest-image.sh"

readonly cache_dir=${PINPOOL_VM_CACHE:-${HOME:-/root}/.cache/pinpool-softroce}
readonly check_command='ibv_devices && ibv_devinfo -d rxe0 >/tmp/devinfo && cat /tmp/devinfo &&
  grep -q "state:[[:space:]]*PORT_ACTIVE" /tmp/devinfo'

timeout_seconds=600
mode=run
extra_env=()
argv=()
run_dir=
timeout_pid=
tail_pids=()
started=$(date +%s.%N)

usage() {
  sed -n '5,7p' "${BASH_SOURCE[0]}" | sed 's/^#   //' >&2
  exit 125
}

die() {
  softroce_log "$*"
  exit 125
}

verbose() {
  [ "${PINPOOL_VM_VERBOSE:-0}" = 1 ] || return 0
  softroce_log "$(awk -v s="$started" -v n="$(date +%s.%N)" 'BEGIN { printf "%6.2fs", n - s }') $*"
}

parse_args() {
  while [ $# -gt 0 ]; do
    case $1 in
      --timeout) [ $# -ge 2 ] || usage; timeout_seconds=$2; shift 2 ;;
      --timeout=*) timeout_seconds=${1#*=}; shift ;;
      --env) [ $# -ge 2 ] || usage; extra_env+=("$2"); shift 2 ;;
      --check) mode=check; shift ;;
      --prepare) mode=prepare; shift ;;
      -h | --help) usage ;;
      --) shift; break ;;
      -*) softroce_log "unknown option $1"; usage ;;
      *) break ;;
    esac
  done
  [[ $timeout_seconds =~ ^[1-9][0-9]*$ ]] || die "--timeout needs a positive number of seconds"
  argv=("$@")
  if [ "$mode" = check ]; then
    argv=(bash -c "$check_command")
  elif [ "$mode" = run ] && [ ${#argv[@]} -eq 0 ]; then
    usage
  fi
}

require_host() {
  local tool
  for tool in qemu-system-x86_64 timeout modprobe depmod cpio strip apt-get dpkg flock; do
    command -v "$tool" >/dev/null || die "$tool not found; run scripts/setup-vm-deps.sh"
  done
  [ -x "$softroce_busybox" ] || die "$softroce_busybox not found; run scripts/setup-vm-deps.sh"
  case $cache_dir/ in
    /tmp/*) die "PINPOOL_VM_CACHE=$cache_dir is under /tmp, whose guest-side writes stay in the guest" ;;
  esac
  [[ $cache_dir != *[[:space:]]* ]] ||
    die "PINPOOL_VM_CACHE must not contain spaces (it goes on the kernel cmdline)"
  case ${PINPOOL_VM_ACCEL:-tcg} in
    tcg | kvm) ;;
    *) die "PINPOOL_VM_ACCEL must be tcg or kvm" ;;
  esac
}

# Reads and checks the PINPOOL_VM_* topology knobs into the guest_* globals.
read_topology() {
  local spec node seen=
  guest_cpus=${PINPOOL_VM_CPUS:-2}
  guest_memory=${PINPOOL_VM_MEMORY:-2048}
  [[ $guest_cpus =~ ^[1-9][0-9]*$ ]] || die "PINPOOL_VM_CPUS must be a positive number"
  [[ $guest_memory =~ ^[1-9][0-9]*$ ]] || die "PINPOOL_VM_MEMORY must be a positive number of MiB"
  guest_numa=${PINPOOL_VM_NUMA:-1}
  [[ $guest_numa =~ ^[1-9][0-9]*$ ]] || die "PINPOOL_VM_NUMA must be a number of nodes"
  if [ "$guest_numa" -gt 1 ]; then
    # One socket per node: vCPUs of one socket split over nodes make the kernel warn (topology_sane).
    [ $((guest_cpus % guest_numa)) -eq 0 ] ||
      die "PINPOOL_VM_NUMA=$guest_numa needs PINPOOL_VM_CPUS ($guest_cpus) to be a multiple of it"
  fi
  guest_nic=${PINPOOL_VM_NIC:-dummy}
  guest_nic_node=${PINPOOL_VM_NIC_NODE:-}
  guest_link=${PINPOOL_VM_LINK:-}
  if [ -n "$guest_nic_node" ]; then
    if ! [[ $guest_nic_node =~ ^[0-9]+$ ]] || [ "$guest_nic_node" -ge "$guest_numa" ]; then
      die "PINPOOL_VM_NIC_NODE=$guest_nic_node needs PINPOOL_VM_NUMA > $guest_nic_node"
    fi
    guest_nic=virtio
  fi
  case $guest_link in
    '') ;;
    listen:?* | connect:?*) guest_nic=virtio ;;
    *) die "PINPOOL_VM_LINK must be listen:SOCKET or connect:SOCKET" ;;
  esac
  case $guest_nic in
    dummy | virtio) ;;
    *) die "PINPOOL_VM_NIC must be dummy or virtio" ;;
  esac
  guest_addr=${PINPOOL_VM_ADDR:-10.77.0.1/24}
  [[ $guest_addr =~ ^([0-9]{1,3}\.){3}[0-9]{1,3}/[0-9]{1,2}$ ]] ||
    die "PINPOOL_VM_ADDR must look like 10.77.0.1/24"
  guest_hostname=${PINPOOL_VM_HOSTNAME:-}
  [[ $guest_hostname =~ ^[A-Za-z0-9.-]*$ ]] || die "PINPOOL_VM_HOSTNAME must be a plain host name"
  # Either one global count, or a count per node (the kernel spreads a global count over the nodes).
  guest_hugepages=()
  [ -n "${PINPOOL_VM_HUGEPAGES:-}" ] || return 0
  IFS=, read -ra guest_hugepages <<<"$PINPOOL_VM_HUGEPAGES"
  [[ $PINPOOL_VM_HUGEPAGES =~ ^[0-9]+$ ]] && return 0
  for spec in "${guest_hugepages[@]}"; do
    [[ $spec =~ ^([0-9]+):[0-9]+$ ]] ||
      die "PINPOOL_VM_HUGEPAGES must be COUNT or NODE:COUNT[,NODE:COUNT]..., not $PINPOOL_VM_HUGEPAGES"
    node=${BASH_REMATCH[1]}
    [ "$node" -lt "$guest_numa" ] ||
      die "PINPOOL_VM_HUGEPAGES names node $node; PINPOOL_VM_NUMA gives the guest $guest_numa node(s)"
    [[ " $seen " != *" $node "* ]] || die "PINPOOL_VM_HUGEPAGES names node $node twice"
    seen+=" $node"
  done
}

# A MAC in QEMU's range made of the address's last three octets: guests with different addresses never
# share one, and the guest finds its NIC by it.
guest_mac() {
  local b c d
  IFS=./ read -r _ b c d _ <<<"$guest_addr"
  printf '52:54:00:%02x:%02x:%02x\n' "$b" "$c" "$d"
}

# The job is bash source read by guest-session.sh: where to run, with what environment, what, and how to
# set up the guest's network (guest_netdev_mac empty: dummy0) and huge pages.
write_job() {
  local job_cwd=$PWD job_env job_argv entry guest_netdev_mac=
  if [ "$guest_nic" = virtio ]; then guest_netdev_mac=$(guest_mac); fi
  job_env=(
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    "HOME=${HOME:-/root}" USER=root LOGNAME=root LANG=C.UTF-8 TMPDIR=/tmp PINPOOL_SOFTROCE=1
    "PINPOOL_HOST_ADDR=${guest_addr%/*}"
  )
  for entry in "${extra_env[@]}"; do
    if [[ $entry == *=* ]]; then
      job_env+=("$entry")
    elif [ -n "${!entry+set}" ]; then
      job_env+=("$entry=${!entry}")
    fi
  done
  job_argv=("${argv[@]}")
  declare -p job_cwd job_env job_argv guest_netdev_mac guest_addr guest_hostname guest_hugepages \
    >"$run_dir/job"
}

# QEMU option values escape a comma by doubling it.
qemu_escape() { echo "${1//,/,,}"; }

# Prints the QEMU arguments of the CPUs and memory: -smp/-m, plus one memory backend and node per NUMA
# node, each node one socket with its share of the vCPUs.
qemu_topology_args() {
  local node per_node_mib cpus_per_node first
  if [ "$guest_numa" -le 1 ]; then
    printf '%s\n' -smp "$guest_cpus" -m "$guest_memory"
    return 0
  fi
  per_node_mib=$((guest_memory / guest_numa))
  cpus_per_node=$((guest_cpus / guest_numa))
  printf '%s\n' -smp "$guest_cpus,sockets=$guest_numa" -m "$((per_node_mib * guest_numa))"
  for ((node = 0; node < guest_numa; node++)); do
    first=$((node * cpus_per_node))
    printf '%s\n' -object "memory-backend-ram,id=mem$node,size=${per_node_mib}M" \
      -numa "node,nodeid=$node,cpus=$first-$((first + cpus_per_node - 1)),memdev=mem$node"
  done
}

# Prints the QEMU arguments of the virtio NIC, if any: its backend (a unix-socket link to another guest,
# or a hub port that goes nowhere) and the device, behind a PCI expander bridge on a NUMA node if asked.
qemu_nic_args() {
  local backend device socket
  [ "$guest_nic" = virtio ] || return 0
  socket=$(qemu_escape "${guest_link#*:}")
  case $guest_link in
    listen:*) backend="stream,id=net0,server=on,addr.type=unix,addr.path=$socket" ;;
    connect:*) backend="stream,id=net0,server=off,addr.type=unix,addr.path=$socket" ;;
    *) backend=hubport,id=net0,hubid=0 ;;
  esac
  device="virtio-net-pci,netdev=net0,mac=$(guest_mac)"
  if [ -n "$guest_nic_node" ]; then
    # The expander bridge is an ACPI root bridge with a _PXM: devices behind it get a numa_node.
    printf '%s\n' -device "pxb,id=pxb1,bus_nr=32,numa_node=$guest_nic_node,bus=pci.0"
    device+=",bus=pxb1,addr=0x1"
  fi
  printf '%s\n' -netdev "$backend" -device "$device"
}

# Prints QEMU's arguments, one per line.
qemu_args() {
  local image=$1 accel cpu port cmdline security
  # passthrough stores the guest's owners and modes as they are, which needs root on the host; without
  # root, files are created as the caller and the host's permission checks apply to the guest.
  if [ "$(id -u)" -eq 0 ]; then security=passthrough; else security=none; fi
  if [ "${PINPOOL_VM_ACCEL:-tcg}" = kvm ]; then accel=kvm cpu=host; else accel=tcg cpu=max; fi
  cmdline="console=ttyS0 panic=-1 cryptomgr.notests tsc=reliable mitigations=off"
  # Every console line costs serial-port exits under TCG: the full kernel log only when asked for.
  if [ "${PINPOOL_VM_VERBOSE:-0}" = 1 ]; then cmdline+=" earlyprintk=ttyS0"; else cmdline+=" quiet"; fi
  cmdline+=" pinpool.session=$script_dir/guest-session.sh pinpool.run=$run_dir"
  cmdline+=" pinpool.9pcache=${PINPOOL_VM_9P_CACHE:-loose}"
  printf '%s\n' -nodefaults -no-user-config -no-reboot -display none \
    -machine "pc,accel=$accel" -cpu "$cpu" \
    -kernel "$(qemu_escape "$image/vmlinux")" -initrd "$(qemu_escape "$image/initramfs.cpio")" \
    -append "$cmdline" \
    -serial "file:$(qemu_escape "$run_dir/console.log")" -pidfile "$run_dir/qemu.pid" \
    -fsdev "local,id=hostroot,path=/,security_model=$security,multidevs=remap" \
    -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
    -device virtio-serial-pci,id=vser
  qemu_topology_args
  qemu_nic_args
  for port in out err ctl; do
    printf '%s\n' -chardev "file,id=$port,path=$(qemu_escape "$run_dir/$port")" \
      -device "virtserialport,bus=vser.0,chardev=$port,name=pinpool.$port"
  done
}

# Streams a growing file to stdout or stderr until the QEMU wrapper has exited and the file is drained.
stream() {
  local file=$1 fd=$2
  tail -c +1 -s 0.1 -f --pid="$timeout_pid" "$file" >&"$fd" &
  tail_pids+=($!)
}

qemu_alive() {
  local pid
  pid=$(cat "$run_dir/qemu.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && grep -qF "$run_dir" "/proc/$pid/cmdline" 2>/dev/null && echo "$pid"
}

# Runs on every exit path: stop QEMU (TERM through timeout, then KILL), the streams, remove the run dir.
cleanup() {
  local pid _
  # A second signal (Ctrl-C twice, or a signal sent to the whole process group) must not cut this short.
  trap '' INT TERM HUP
  if [ -n "$timeout_pid" ] && kill -0 "$timeout_pid" 2>/dev/null; then
    kill -TERM "$timeout_pid" 2>/dev/null || true
    for _ in $(seq 50); do
      kill -0 "$timeout_pid" 2>/dev/null || break
      sleep 0.1
    done
  fi
  if [ -n "$run_dir" ] && pid=$(qemu_alive); then
    kill -KILL "$pid" 2>/dev/null || true
  fi
  for pid in "${tail_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  if [ -n "$run_dir" ]; then
    if [ "${PINPOOL_VM_KEEP:-0}" = 1 ]; then softroce_log "kept $run_dir"; else rm -rf "$run_dir"; fi
  fi
}

report_failure() {
  local what=$1
  softroce_log "$what"
  if [ -s "$run_dir/ctl" ]; then sed 's/^/softroce: ctl: /' "$run_dir/ctl" >&2; fi
  if [ -s "$run_dir/qemu.log" ]; then
    softroce_log "qemu said:"
    tail -n 20 "$run_dir/qemu.log" >&2
  fi
  if [ -s "$run_dir/console.log" ]; then
    softroce_log "guest console (last 40 lines):"
    tail -n 40 "$run_dir/console.log" >&2
  else
    softroce_log "the guest console is empty: the kernel died before its console came up (too little" \
      "memory? a vmlinux without PVH entry?); PINPOOL_VM_VERBOSE=1 adds earlyprintk"
  fi
}

boot_guest() {
  local image=$1 qemu_rc=0 rc args
  mapfile -t args < <(qemu_args "$image")
  : >"$run_dir/out"
  : >"$run_dir/err"
  : >"$run_dir/ctl"
  verbose "booting (console: $run_dir/console.log)"
  timeout --kill-after=10 "$timeout_seconds" qemu-system-x86_64 "${args[@]}" >"$run_dir/qemu.log" 2>&1 &
  timeout_pid=$!
  stream "$run_dir/out" 1
  stream "$run_dir/err" 2
  # A boot that has not reached "ready" (rxe0 active, the command about to start) in
  # PINPOOL_VM_BOOT_SECONDS is a hung boot, not a result: QEMU under TCG was seen, rarely, to
  # print nothing and never come up. Stop it; main boots once more. The command never ran.
  local ticks=0 boot_ticks=$(( ${PINPOOL_VM_BOOT_SECONDS:-180} * 10 ))
  while kill -0 "$timeout_pid" 2>/dev/null; do
    if [ $ticks -ge $boot_ticks ] && ! grep -q '^ready' "$run_dir/ctl"; then
      report_failure "the guest did not come up in ${PINPOOL_VM_BOOT_SECONDS:-180}s"
      kill -TERM "$timeout_pid" 2>/dev/null || true
      wait "$timeout_pid" 2>/dev/null || true
      wait "${tail_pids[@]}" 2>/dev/null || true
      tail_pids=()
      timeout_pid=
      return 126
    fi
    sleep 0.1
    ticks=$((ticks + 1))
  done
  wait "$timeout_pid" || qemu_rc=$?
  wait "${tail_pids[@]}" 2>/dev/null || true
  tail_pids=()
  timeout_pid=
  verbose "guest gone (qemu exit $qemu_rc); $(tr '\n' ' ' <"$run_dir/ctl")"

  rc=$(sed -n 's/^exit=//p' "$run_dir/ctl" | tail -n 1)
  if [ "$qemu_rc" -eq 124 ] || [ "$qemu_rc" -eq 137 ]; then
    report_failure "timed out after ${timeout_seconds}s ($(grep -q '^ready' "$run_dir/ctl" &&
      echo 'the command was running' || echo 'during boot'))"
    return 124
  fi
  if ! grep -q '^ready' "$run_dir/ctl" || [ -z "$rc" ]; then
    report_failure "the guest failed before the command ran (qemu exit $qemu_rc)"
    return 125
  fi
  return "$rc"
}

main() {
  local image rc=0
  parse_args "$@"
  # Already inside the guest (ctest run in it, say): QEMU under TCG under TCG helps nobody; run in place.
  if [ "${PINPOOL_SOFTROCE:-0}" = 1 ] && [ "$mode" != prepare ]; then
    exec timeout "$timeout_seconds" "${argv[@]}"
  fi
  require_host
  # --prepare builds the one image every topology boots; the knobs matter only to a run.
  [ "$mode" = prepare ] || read_topology
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP
  image=$(softroce_prepare_image "$cache_dir") || die "could not prepare the guest image in $cache_dir"
  verbose "image ready: $image ($(cat "$image/kver"))"
  if [ "$mode" = prepare ]; then
    echo "$image"
    return 0
  fi
  mkdir -p "$cache_dir/runs"
  run_dir=$(mktemp -d "$cache_dir/runs/run.XXXXXX")
  write_job
  boot_guest "$image" || rc=$?
  if [ "$rc" -eq 126 ]; then
    softroce_log "booting the guest again (attempt 2 of 2): the first boot hung before the command ran"
    rc=0
    boot_guest "$image" || rc=$?
    [ "$rc" -ne 126 ] || rc=125
  fi
  if [ "$mode" = check ]; then
    if [ "$rc" -eq 0 ]; then
      softroce_log "check passed: rxe0 is PORT_ACTIVE"
    else
      softroce_log "check FAILED ($rc)"
    fi
  fi
  return "$rc"
}

main "$@"
