#!/usr/bin/env bash
# Installs every Debian 12 package pinpool needs to build, test and benchmark (clang 14 and its
# compiler-rt: the libFuzzer target and its sanitizer runtimes; gcc's sanitizers come with gcc).
# Idempotent and quiet: does nothing (and needs no network) when all packages are present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libibverbs-dev librdmacm-dev ibverbs-providers rdma-core ibverbs-utils
  libjemalloc-dev libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev liburing-dev
  util-linux
  clang-14 libclang-rt-14-dev python3
  libmimalloc-dev libgoogle-perftools-dev libucx-dev libfabric-dev perftest gnuplot-nox
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "pinpool: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
