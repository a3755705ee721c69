#!/usr/bin/env bash
# Installs the Debian 12 packages the soft-RoCE guest harness (scripts/softroce/) needs on the host:
# QEMU (TCG), a static busybox for the initramfs, kmod for module dependency resolution, binutils to
# strip module signatures, the decompressors for vmlinuz/modules, and the host's verbs userspace that
# the guest reuses through its 9p root.
# Contract: idempotent and quiet. Does nothing (and needs no network) when every package is present
# and the kernel index is known to apt; runs `apt-get update` only when something is missing.
# Needs root or sudo only when it installs.
set -euo pipefail

readonly packages=(
  qemu-system-x86 busybox-static kmod cpio binutils coreutils
  xz-utils zstd gzip
  rdma-core ibverbs-utils ibverbs-providers libibverbs-dev iproute2 rdmacm-utils numactl
  gcc libc6-dev
)

missing_packages() {
  local p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

# run-in-guest.sh fetches the kernel with `apt-get download`, which needs linux-image-amd64 in the index.
kernel_index_known() {
  apt-cache depends linux-image-amd64 2>/dev/null | grep -q 'Depends: linux-image-'
}

# Runs a command as root, silently; its output is shown only when it fails.
quietly_as_root() {
  local log rc=0
  log=$(mktemp)
  if [ "$(id -u)" -eq 0 ]; then
    "$@" >"$log" 2>&1 || rc=$?
  else
    # shellcheck disable=SC2024 # the log is ours; only the command needs root
    sudo "$@" >"$log" 2>&1 || rc=$?
  fi
  [ "$rc" -eq 0 ] || { cat "$log" >&2; echo "pinpool: failed ($rc): $*" >&2; }
  rm -f "$log"
  return "$rc"
}

main() {
  local missing
  mapfile -t missing < <(missing_packages)
  if [ ${#missing[@]} -eq 0 ] && kernel_index_known; then
    return 0
  fi
  export DEBIAN_FRONTEND=noninteractive
  quietly_as_root apt-get update -qq
  if [ ${#missing[@]} -gt 0 ]; then
    echo "pinpool: installing ${missing[*]}" >&2
    quietly_as_root apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
  kernel_index_known || { echo "pinpool: apt does not know linux-image-amd64" >&2; return 1; }
}

main "$@"
