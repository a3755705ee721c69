#!/usr/bin/env bash
# Linking test (ctest `linking.malloc_unchanged`): installs this build tree into a fresh temporary
# prefix, builds tests/linking/malloc_unchanged.cc against the installed pinpool the way an
# application would (tests/linking/app: find_package + pinpool::pinpool), runs it, and runs
# check-exports.sh on the installed libpinpool.so and provider libraries (libpinpool_<e>.so for
# each e in PINPOOL_PROVIDERS) as well. Fails loudly on any error.
# Needs no network; removes its temporary directory on exit (set PINPOOL_KEEP_TMP=1 to keep it).
#
# Environment (set by tests/linking/CMakeLists.txt):
#   PINPOOL_BUILD_DIR   the build tree to install (already built)
#   PINPOOL_LIBDIR      CMAKE_INSTALL_LIBDIR of that tree
#   PINPOOL_PROVIDERS     the provider libraries that tree built ("ucx fabric"; empty: none)
#   CMAKE, CMAKE_GENERATOR, CXX   tools to use (default: cmake, Ninja if present, c++)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../support/install-prefix.sh
source "$here/../support/install-prefix.sh" linking
installed_lib=$prefix/$libdir/libpinpool.so
[[ -f $installed_lib ]] || fail "not installed: $libdir/libpinpool.so"

# Both checks always run, so one run shows everything that is wrong.
status=0

step "exported symbols of the installed libraries"
bash "$here/check-exports.sh" "$installed_lib" || status=1
read -r -a providers <<<"${PINPOOL_PROVIDERS:-}"
for e in "${providers[@]}"; do
  provider_lib=$prefix/$libdir/libpinpool_$e.so
  [[ -f $provider_lib ]] || fail "not installed: $libdir/libpinpool_$e.so"
  bash "$here/check-exports.sh" "$provider_lib" || status=1
done

step "build malloc_unchanged against the installed pinpool"
quiet "$cmake" -S "$here/app" -B "$work/app" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo
found=$(sed -n 's/^pinpool_DIR:PATH=//p' "$work/app/CMakeCache.txt")
[[ $found == "$prefix/"* ]] || fail "find_package found pinpool at '$found', not in $prefix"
quiet "$cmake" --build "$work/app"

step "run malloc_unchanged"
# It checks itself that libpinpool.so was loaded from the prefix (argument 1).
"$work/app/malloc_unchanged" "$prefix/$libdir" || status=1

[[ $status -eq 0 ]] || fail "see the FAIL lines above"
echo "linking: the installed pinpool leaves malloc alone"
