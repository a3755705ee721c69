# shellcheck shell=bash
# Builds and caches the soft-RoCE guest's boot image; sourced by run-in-guest.sh (not executable).
# Owns the cache directory layout ($PINPOOL_VM_CACHE, default ~/.cache/pinpool-softroce):
#   kernel-pkg           name of the linux-image-* package linux-image-amd64 depends on (re-resolved
#                        whenever apt's package lists are newer than this file)
#   debs/<pkg>_*.deb     that package, fetched with `apt-get download` (never installed on the host)
#   images/<key>/        vmlinux (uncompressed ELF, booted through its PVH entry) and initramfs.cpio
#                        (static busybox, guest-init.sh as /init, the modules in dependency order)
#   runs/run.*/          one directory per guest run, owned and removed by run-in-guest.sh
# <key> hashes every input of the image (package file, this file, guest-init.sh, the module list,
# busybox), so editing any of them rebuilds it; older images are deleted then. The kernel tree from
# `dpkg -x` is only a staging area (~440 MB) and is removed once the image is built.
# Thread-safety: softroce_prepare_image holds an flock on the cache for the whole build, so concurrent
# runs build once and then share the result.

# Modules the guest loads, in order; their dependencies are resolved with modprobe. crc32_generic is not
# autoloaded by anything in the initramfs, yet rdma_rxe cannot add a device without it.
readonly softroce_modules=(
  crc32_generic virtio_pci virtio_console 9pnet_virtio 9p overlay dummy virtio_net
  rdma_rxe ib_uverbs rdma_ucm ib_umad
)
readonly softroce_busybox=/bin/busybox
softroce_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly softroce_dir

softroce_log() { echo "softroce: $*" >&2; }

# Runs a command with its output hidden unless it fails.
softroce_quietly() {
  local log rc=0
  log=$(mktemp)
  "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    cat "$log" >&2
    softroce_log "failed ($rc): $*"
  fi
  rm -f "$log"
  return "$rc"
}

softroce_kernel_pkg() {
  local cache=$1 stamp=$1/kernel-pkg pkg
  if [ -s "$stamp" ] &&
    ! find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -newer "$stamp" | grep -q .; then
    cat "$stamp"
    return 0
  fi
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
    sed -n 's/^ *Depends: \(linux-image-[^ ]*\)$/\1/p' | head -n 1)
  if [ -z "$pkg" ]; then
    softroce_log "apt does not know linux-image-amd64; run scripts/setup-vm-deps.sh"
    return 1
  fi
  echo "$pkg" >"$stamp"
  echo "$pkg"
}

# Prints the path of the cached .deb of package $2, downloading it (and dropping older ones) if needed.
softroce_fetch_deb() {
  local debs=$1/debs pkg=$2 deb
  mkdir -p "$debs"
  deb=$(find "$debs" -maxdepth 1 -name "${pkg}_*.deb" | head -n 1)
  if [ -z "$deb" ]; then
    softroce_log "downloading $pkg (about 70 MB, once)"
    find "$debs" -maxdepth 1 -name '*.deb' -delete
    (cd "$debs" && softroce_quietly apt-get download -q "$pkg") || return 1
    deb=$(find "$debs" -maxdepth 1 -name "${pkg}_*.deb" | head -n 1)
  fi
  [ -n "$deb" ] || { softroce_log "apt-get download $pkg produced no .deb"; return 1; }
  echo "$deb"
}

softroce_is_elf() {
  [ "$(head -c 4 "$1" | od -An -c | tr -d ' \n')" = '177ELF' ]
}

# vmlinuz is a decompressor stub plus a compressed vmlinux; finds the payload by its magic, unpacks it
# and keeps the first candidate that is an ELF file. Booting that ELF skips the decompressor, which is
# slow under TCG.
softroce_extract_vmlinux() {
  local vmlinuz=$1 out=$2 spec magic tool off
  for spec in 'xz -dc --single-stream|\xfd7zXZ\x00' 'zstd -dcq|\x28\xb5\x2f\xfd' \
    'gzip -dcq|\x1f\x8b\x08'; do
    tool=${spec%%|*}
    magic=${spec#*|}
    while read -r off; do
      tail -c "+$((off + 1))" "$vmlinuz" | $tool >"$out" 2>/dev/null || true
      softroce_is_elf "$out" && return 0
    done < <(LC_ALL=C grep -obUaP "$magic" "$vmlinuz" | cut -d: -f1)
  done
  rm -f "$out"
  softroce_log "no compressed ELF vmlinux found in $vmlinuz"
  return 1
}

# Prints the .ko paths to insmod, dependencies first, each once.
softroce_module_paths() {
  local tree=$1 kver=$2 mod
  for mod in "${softroce_modules[@]}"; do
    modprobe -d "$tree" -S "$kver" --show-depends "$mod" || {
      softroce_log "modprobe cannot resolve $mod for $kver"
      return 1
    }
  done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }'
}

# Copies one module into the initramfs, decompressed and without its signature: the RSA check of every
# signed module is slow under TCG (the kernel gets tainted, which is harmless here).
softroce_add_module() {
  local src=$1 dest_dir=$2 name plain
  name=$(basename "$src")
  plain=${name%.xz}
  plain=${plain%.zst}
  case $name in
    *.xz) xz -dc "$src" >"$dest_dir/$plain.tmp" ;;
    *.zst) zstd -dcq "$src" >"$dest_dir/$plain.tmp" ;;
    *) cp "$src" "$dest_dir/$plain.tmp" ;;
  esac || return 1
  strip --strip-debug -o "$dest_dir/$plain" "$dest_dir/$plain.tmp" || return 1
  rm -f "$dest_dir/$plain.tmp"
  echo "$plain" >>"$dest_dir/order"
}

softroce_build_initramfs() {
  local tree=$1 kver=$2 out=$3 root path paths
  root=$(dirname "$out")/initramfs-root
  mkdir -p "$root"/{bin,dev,proc,sys,newroot,lib/modules} &&
    cp "$softroce_busybox" "$root/bin/busybox" &&
    install -m 0755 "$softroce_dir/guest-init.sh" "$root/init" &&
    paths=$(softroce_module_paths "$tree" "$kver") &&
    : >"$root/lib/modules/order" || return 1
  for path in $paths; do
    softroce_add_module "$path" "$root/lib/modules" || return 1
  done
  # Uncompressed: unpacking gzip under TCG costs more than QEMU copying a few MB.
  (cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc -R 0:0 --quiet) >"$out" ||
    return 1
  rm -rf "$root"
}

softroce_image_key() {
  local deb=$1
  {
    basename "$deb"
    printf '%s\n' "${softroce_modules[@]}"
    cat "$softroce_dir/guest-image.sh" "$softroce_dir/guest-init.sh"
    sha256sum <"$softroce_busybox"
  } | sha256sum | cut -c 1-16
}

# Error checks are explicit: callers run this in an `||` list, where bash ignores set -e.
softroce_build_image() {
  local deb=$1 image=$2 stage tree kver vmlinuz
  stage=$(mktemp -d "$image.building.XXXXXX") || return 1
  tree=$stage/tree
  softroce_log "building the guest image (kernel $(basename "$deb"))"
  dpkg -x "$deb" "$tree" || return 1
  kver=$(find "$tree/lib/modules" -mindepth 1 -maxdepth 1 -printf '%f\n' | head -n 1)
  vmlinuz=$tree/boot/vmlinuz-$kver
  if [ -z "$kver" ] || [ ! -f "$vmlinuz" ]; then
    softroce_log "unexpected layout in $deb"
    return 1
  fi
  softroce_quietly depmod -b "$tree" "$kver" &&
    softroce_extract_vmlinux "$vmlinuz" "$stage/vmlinux" &&
    softroce_build_initramfs "$tree" "$kver" "$stage/initramfs.cpio" &&
    echo "$kver" >"$stage/kver" || return 1
  rm -rf "$tree"
  mv "$stage" "$image"
}

# Prints the directory holding vmlinux, initramfs.cpio and kver, building it if needed.
softroce_prepare_image() {
  local cache=$1 lock pkg deb key image old
  mkdir -p "$cache/images"
  exec {lock}>"$cache/.lock"
  flock "$lock"
  if ! pkg=$(softroce_kernel_pkg "$cache") || ! deb=$(softroce_fetch_deb "$cache" "$pkg"); then
    exec {lock}>&-
    return 1
  fi
  key=$(softroce_image_key "$deb")
  image=$cache/images/$key
  # Left behind by a build that was interrupted; nobody else builds while we hold the lock.
  rm -rf "$cache/images/"*.building.*
  if [ ! -f "$image/initramfs.cpio" ]; then
    softroce_build_image "$deb" "$image" || { exec {lock}>&-; return 1; }
    for old in "$cache/images/"*; do
      [ "$old" = "$image" ] || rm -rf "$old"
    done
  fi
  exec {lock}>&-
  echo "$image"
}
