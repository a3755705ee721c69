#!/bin/busybox sh
# shellcheck shell=dash
# PID 1 of the soft-RoCE guest's initramfs (busybox ash; copied into the image by guest-image.sh).
# Owns the guest's kernel-level setup: loads the modules listed in /lib/modules/order (dependency order,
# signatures stripped), mounts the host's / (virtio-9p tag "hostroot") at /newroot with proc, sys, dev,
# a tmpfs on /tmp and /dev/shm, names the virtio-serial ports under /dev/virtio-ports/, then chroots into
# guest-session.sh (a path on the host, passed as pinpool.session= on the kernel command line).
# Invariants: it never creates or writes anything on the 9p root outside those guest-only mounts; it
# always ends in a power-off, writing "exit=N" (the session's exit status) to the control port first.
# If this script itself dies the kernel panics, and panic=-1 plus QEMU's -no-reboot end the guest; the
# host then reports a boot failure with the console tail.
set -eu

readonly ports=/dev/virtio-ports
readonly root=/newroot

log() {
  local up='?'
  [ -r /proc/uptime ] && read -r up _ </proc/uptime
  echo "[$up] softroce-init: $*" >/dev/console
}

# Reports a setup failure on every channel the host reads, then powers off.
fail() {
  log "FAILED: $*"
  [ -e "$ports/pinpool.err" ] && echo "softroce: guest init failed: $*" >"$ports/pinpool.err"
  [ -e "$ports/pinpool.ctl" ] && echo "error=$*" >"$ports/pinpool.ctl"
  power_off
}

power_off() {
  sync
  poweroff -f
  sleep 60
}

mount_basics() {
  /bin/busybox mkdir -p /proc /sys /dev
  /bin/busybox mount -t devtmpfs devtmpfs /dev
  exec </dev/console >/dev/console 2>&1
  /bin/busybox --install -s /bin
  mount -t proc proc /proc
  mount -t sysfs sysfs /sys
}

cmdline_value() {
  tr ' ' '\n' </proc/cmdline | sed -n "s/^$1=//p" | tail -n 1
}

load_modules() {
  local mod
  while read -r mod; do
    insmod "/lib/modules/$mod" || fail "insmod $mod"
  done </lib/modules/order
}

# udev normally creates /dev/virtio-ports/<name>; there is no udev here.
link_ports() {
  local _ name dev
  mkdir -p "$ports"
  for _ in $(seq 100); do
    for name in /sys/class/virtio-ports/*/name; do
      [ -r "$name" ] || continue
      dev=${name%/name}
      ln -sf "/dev/${dev##*/}" "$ports/$(cat "$name")"
    done
    [ -e "$ports/pinpool.out" ] && [ -e "$ports/pinpool.err" ] && [ -e "$ports/pinpool.ctl" ] && return 0
    sleep 0.1
  done
  fail "virtio-serial ports did not appear"
}

# cache=loose (the default, from pinpool.9pcache=) keeps what the guest read in its page cache: host
# programs start 5-10x faster than with cache=mmap/none, at the price of not seeing host-side changes to
# files the guest already read. Dirty pages reach the host at the `sync` before power-off.
mount_root() {
  local cache
  cache=$(cmdline_value pinpool.9pcache)
  mkdir -p "$root"
  mount -t 9p -o "trans=virtio,version=9p2000.L,msize=262144,cache=${cache:-loose}" hostroot "$root" ||
    fail "mount 9p hostroot (cache=${cache:-loose})"
  mount -t proc proc "$root/proc"
  mount -t sysfs sysfs "$root/sys"
  mount -t devtmpfs devtmpfs "$root/dev"
  mkdir -p "$root/dev/shm" "$root/dev/pts"
  mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"
  mount -t devpts devpts "$root/dev/pts"
  # 9p cannot hold FIFOs or unix sockets, and the host's /tmp is not ours to litter: the guest's
  # /tmp is an overlay whose writes go to a tmpfs, while the host's files there (a build tree in a
  # clone under /tmp, as CI may make) stay visible.
  mkdir -p /tmpovl
  mount -t tmpfs -o mode=0755 tmpfs /tmpovl
  mkdir -p /tmpovl/upper /tmpovl/work
  chmod 1777 /tmpovl/upper
  mount -t overlay overlay -o "lowerdir=$root/tmp,upperdir=/tmpovl/upper,workdir=/tmpovl/work" \
    "$root/tmp" || mount -t tmpfs -o mode=1777 tmpfs "$root/tmp" ||
    fail "mount /tmp"
}

run_session() {
  local session run rc=0
  session=$(cmdline_value pinpool.session)
  run=$(cmdline_value pinpool.run)
  if [ -z "$session" ] || [ -z "$run" ]; then
    fail "pinpool.session= and pinpool.run= missing from the cmdline"
  fi
  [ -r "$root$session" ] || fail "session script $session not readable over 9p"
  chroot "$root" /bin/bash "$session" "$run" || rc=$?
  echo "exit=$rc" >"$ports/pinpool.ctl"
}

main() {
  mount_basics
  log "loading modules"
  load_modules
  log "naming ports"
  link_ports
  log "mounting the host's /"
  mount_root
  log "starting the session"
  run_session
  power_off
}

main
