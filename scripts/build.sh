#!/usr/bin/env bash
# Configures and builds pinpool into build/ (or $PINPOOL_BUILD_DIR). Shared by demo.sh and
# test.sh. Extra arguments go to cmake's configure step.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PINPOOL_BUILD_DIR:-$root/build}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPINPOOL_WERROR=ON "$@" >/dev/null
cmake --build "$build" --parallel "$(nproc)"
