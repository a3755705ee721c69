#!/usr/bin/env bash
# Configures and builds the whole of pinpool into build/ (or $PINPOOL_BUILD_DIR), for test.sh
# (demo.sh builds the library and the demo alone). Extra arguments go to cmake's configure step.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PINPOOL_BUILD_DIR:-$root/build}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPINPOOL_WERROR=ON "$@" >/dev/null
cmake --build "$build" --parallel "$(nproc)"
