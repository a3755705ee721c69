#!/usr/bin/env bash
# The README's second command, and what CI runs: installs what pinpool needs (Debian 12),
# builds it, and runs the whole test suite with ctest: unit, stress, linking, packaging,
# examples, benchmarks as smoke tests, and the RDMA tests inside a soft-RoCE QEMU guest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PINPOOL_BUILD_DIR:-$root/build}
"$root/scripts/setup-deps.sh"
if [ -x "$root/scripts/setup-vm-deps.sh" ]; then "$root/scripts/setup-vm-deps.sh"; fi
"$root/scripts/build.sh"
cd "$build"
# The set-up above installed QEMU: an RDMA test that cannot boot the guest is a failure, not a skip.
export PINPOOL_REQUIRE_RDMA=1
ctest --output-on-failure --timeout 900 -j "$(nproc)" "$@"
