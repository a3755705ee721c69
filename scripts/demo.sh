#!/usr/bin/env bash
# The README's first command: installs what the library and the demo need (Debian 12), builds
# them alone, and runs the demo (a pool on the best domain available, its blocks, keys, page
# sizes and stats). Tests, benchmarks, tools and providers are off, in a build directory of the
# demo's own (build-demo/, or $PINPOOL_DEMO_BUILD_DIR), so that scripts/test.sh's build/ keeps
# its options; Release, since debug information only slows the first build down.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PINPOOL_DEMO_BUILD_DIR:-$root/build-demo}
"$root/scripts/setup-deps.sh" --build
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPINPOOL_BUILD_TESTS=OFF -DPINPOOL_BUILD_BENCHMARKS=OFF -DPINPOOL_BUILD_TOOLS=OFF \
  -DPINPOOL_WITH_UCX=OFF -DPINPOOL_WITH_FABRIC=OFF -DPINPOOL_INSTALL=OFF >/dev/null
cmake --build "$build" --target pinpool_demo --parallel "$(nproc)"
exec "$build/examples/pinpool_demo"
