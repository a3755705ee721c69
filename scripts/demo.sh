#!/usr/bin/env bash
# The README's first command: installs what pinpool needs (Debian 12), builds it, and runs the
# demo (a pool on the best domain available, its blocks, keys, page sizes and stats).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup-deps.sh"
"$root/scripts/build.sh"
exec "${PINPOOL_BUILD_DIR:-$root/build}/examples/pinpool_demo"
