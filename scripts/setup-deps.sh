#!/usr/bin/env bash
# Installs the Debian 12 packages pinpool needs, in two sets, each package named once:
#   build_packages: the library and the examples (scripts/demo.sh installs only these:
#     `setup-deps.sh --build`);
#   test_packages: what the tests, benchmarks, providers and the fuzzer add (valgrind: the
#     instruction counts, bench/instruction-counts.sh; clang 14 and its
#     compiler-rt: the libFuzzer target and its sanitizer runtimes; gcc's sanitizers come with gcc),
#     and the Python package with its tests (python/: pybind11 and the interpreter's headers to
#     build it; numpy, torch, pytest and pyverbs to test it; venv, setuptools and wheel for
#     `pip install .` offline).
# With no argument it installs both (scripts/test.sh). The soft-RoCE guest's host packages are
# scripts/setup-vm-deps.sh's.
# Idempotent and quiet: does nothing (and needs no network) when all packages are present.
set -euo pipefail

# g++ rather than build-essential here: make and dpkg-dev (and perl) are not needed to build
# with Ninja, and the first command pays for every package it downloads.
build_packages=(
  g++ cmake ninja-build pkg-config
  libibverbs-dev ibverbs-providers libabsl-dev liburing-dev
)
test_packages=(
  build-essential git librdmacm-dev rdma-core ibverbs-utils
  libjemalloc-dev libgtest-dev libgmock-dev libbenchmark-dev
  util-linux valgrind gdb python3-prometheus-client
  clang-14 libclang-rt-14-dev python3
  libmimalloc-dev libgoogle-perftools-dev libucx-dev libfabric-dev perftest gnuplot-nox
  python3-dev pybind11-dev python3-numpy python3-torch python3-pytest python3-pyverbs
  python3-venv python3-setuptools python3-wheel
)

case "${1:-}" in
  --build) packages=("${build_packages[@]}") ;;
  "") packages=("${build_packages[@]}" "${test_packages[@]}") ;;
  *) echo "usage: $0 [--build]" >&2; exit 2 ;;
esac

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
