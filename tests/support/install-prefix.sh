# shellcheck shell=bash
# Sourced by the tests that install this build tree and build against the installed copy
# (tests/consumer/run.sh, tests/linking/run.sh). Usage, after `set -euo pipefail`:
#   source "$here/../support/install-prefix.sh" NAME
# Reads PINPOOL_BUILD_DIR, PINPOOL_LIBDIR and optionally CMAKE, CMAKE_GENERATOR, CXX; defines
# fail (scripts/lib/harness.sh, with NAME), step and quiet; makes $work (a temporary directory, removed on exit unless
# PINPOOL_KEEP_TMP=1) and installs the build tree into $prefix=$work/prefix.

# shellcheck source=../../scripts/lib/harness.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib/harness.sh" "${1:?NAME}"
trap 'echo "$HARNESS_NAME: FAIL (line $LINENO, exit $?): $BASH_COMMAND" >&2' ERR
step() { echo "== $*"; }

build=${PINPOOL_BUILD_DIR:?set PINPOOL_BUILD_DIR to the pinpool build tree}
libdir=${PINPOOL_LIBDIR:?set PINPOOL_LIBDIR to CMAKE_INSTALL_LIBDIR}
cmake=${CMAKE:-cmake}
cxx=${CXX:-c++}
generator=${CMAKE_GENERATOR:-}
if [[ -z $generator ]]; then
  if command -v ninja >/dev/null; then generator=Ninja; else generator="Unix Makefiles"; fi
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/pinpool-${1:?NAME}.XXXXXX")
cleanup() {
  if [[ ${PINPOOL_KEEP_TMP:-0} == 1 ]]; then
    echo "$HARNESS_NAME: kept $work"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
prefix=$work/prefix

# Runs a command quietly; on failure shows its output and fails.
quiet() {
  local log=$work/last.log
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    fail "$*"
  fi
}

step "install $build into $prefix"
quiet "$cmake" --install "$build" --prefix "$prefix"
