#!/usr/bin/env bash
# Packaging test (ctest `packaging.consumers`): installs this build tree into a fresh temporary
# prefix and proves that an application can use it from there, the two ways users will:
#   1. find_package(pinpool 2.0 CONFIG) + pinpool::pinpool   (tests/consumer/find_package)
#   2. plain pkg-config, g++ -std=c++20                       (tests/consumer/pkg_config/Makefile)
# Each consumer is built, checked to load libpinpool from the prefix, and run (must print OK).
# Also checks the installed layout (no jemalloc shipped), that each installed header compiles on
# its own, that find_package refuses an incompatible version, and that a DESTDIR staged install
# writes the final prefix into pinpool.pc.
# Needs no network; removes its temporary directory on exit (set PINPOOL_KEEP_TMP=1 to keep it).
#
# Environment (set by tests/consumer/CMakeLists.txt):
#   PINPOOL_BUILD_DIR   the build tree to install (already built)
#   PINPOOL_LIBDIR      CMAKE_INSTALL_LIBDIR of that tree (lib, lib/x86_64-linux-gnu, ...)
#   PINPOOL_VERSION     the project version, which pkg-config must report
#   CMAKE, CMAKE_GENERATOR, CXX   tools to use (default: cmake, Ninja if present, c++)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../support/install-prefix.sh
source "$here/../support/install-prefix.sh" consumer
version=${PINPOOL_VERSION:?set PINPOOL_VERSION}

# The directory libpinpool.so.<major> is loaded from when running $1 (with the current env).
loaded_from() {
  local line
  line=$(ldd "$1" | grep -F 'libpinpool.so') || fail "$1 does not link libpinpool"
  line=${line#*=> }
  line=${line%% (*}
  [[ -f $line ]] || fail "$1 cannot find libpinpool: $line"
  dirname "$(realpath "$line")"
}
for f in "$libdir/libpinpool.so" "include/pinpool/pinpool.h" "include/pinpool/pool.h" \
  "include/pinpool/version.h" "$libdir/cmake/pinpool/pinpoolConfig.cmake" \
  "$libdir/cmake/pinpool/pinpoolConfigVersion.cmake" "$libdir/cmake/pinpool/pinpoolTargets.cmake" \
  "$libdir/pkgconfig/pinpool.pc"; do
  [[ -e $prefix/$f ]] || fail "not installed: $f"
done
soname=$(readelf -d "$prefix/$libdir/libpinpool.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ $soname == "libpinpool.so.${version%%.*}" ]] || fail "SONAME is '$soname'"
[[ -e $prefix/$libdir/$soname ]] || fail "not installed: $libdir/$soname"
if jemalloc=$(find "$prefix" -iname '*jemalloc*' | grep .); then
  fail "pinpool links no allocator, yet a jemalloc was installed: $jemalloc"
fi
echo "installed: $(cd "$prefix" && find . -type f -o -type l | sort | tr '\n' ' ')"
expected_libdir=$(realpath "$prefix/$libdir")

step "every installed header compiles on its own (needs nothing that was not installed)"
absl_cflags=$(pkg-config --cflags absl_status absl_statusor)
headers=("$prefix"/include/pinpool/*.h)
for header in "${headers[@]}"; do
  # shellcheck disable=SC2086  # absl_cflags is a list of flags
  echo "#include \"pinpool/$(basename "$header")\"" |
    "$cxx" -std=c++20 -Wall -Wextra -Werror -fsyntax-only -x c++ -I"$prefix/include" $absl_cflags - \
      >"$work/header.log" 2>&1 || { cat "$work/header.log" >&2; fail "pinpool/$(basename "$header")"; }
done
echo "${#headers[@]} headers OK"

step "find_package consumer"
quiet "$cmake" -S "$here/find_package" -B "$work/find_package" -G "$generator" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo
found=$(sed -n 's/^pinpool_DIR:PATH=//p' "$work/find_package/CMakeCache.txt")
[[ $found == "$prefix/"* ]] || fail "find_package found pinpool at '$found', not in $prefix"
quiet "$cmake" --build "$work/find_package"
exe=$work/find_package/consumer_find_package
[[ $(loaded_from "$exe") == "$expected_libdir" ]] || fail "$exe loads libpinpool from elsewhere"
out=$("$exe") || fail "consumer_find_package exited with $?"
echo "$out"
[[ $out == *" consumer OK" ]] || fail "consumer_find_package did not print OK"

# The major version is the ABI version (docs/abi.md): another one, earlier or later, is refused.
for other in 0.1 $(( ${version%%.*} + 1 )).0; do
  step "find_package refuses another ABI (pinpool $other)"
  if "$cmake" -S "$here/find_package" -B "$work/find_package_$other" -G "$generator" \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" -DPINPOOL_CONSUMER_VERSION=$other \
    >"$work/other.log" 2>&1; then
    cat "$work/other.log" >&2
    fail "find_package(pinpool $other) accepted version $version"
  fi
  grep -qF "version: $version" "$work/other.log" ||
    { cat "$work/other.log" >&2; fail "find_package(pinpool $other) failed for another reason"; }
  echo "refused, as it should"
done

step "pkg-config consumer"
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
pc_version=$(pkg-config --modversion pinpool)
[[ $pc_version == "$version" ]] || fail "pkg-config reports version '$pc_version', not $version"
pc_prefix=$(pkg-config --variable=prefix pinpool)
[[ $pc_prefix == "$prefix" ]] || fail "pinpool.pc has prefix=$pc_prefix, not $prefix"
echo "pkg-config --cflags --libs pinpool: $(pkg-config --cflags --libs pinpool)"
if pkg-config --cflags pinpool | grep -q -- '-std='; then fail "pinpool.pc sets the C++ standard"; fi
mkdir "$work/pkg_config"
quiet make -f "$here/pkg_config/Makefile" -C "$work/pkg_config" SRCDIR="$here" CXX="$cxx"
exe=$work/pkg_config/consumer_pkg_config
export LD_LIBRARY_PATH="$prefix/$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[[ $(loaded_from "$exe") == "$expected_libdir" ]] || fail "$exe loads libpinpool from elsewhere"
out=$("$exe") || fail "consumer_pkg_config exited with $?"
echo "$out"
[[ $out == *" consumer OK" ]] || fail "consumer_pkg_config did not print OK"

step "DESTDIR staged install keeps the final prefix in pinpool.pc"
quiet env DESTDIR="$work/stage" "$cmake" --install "$build" --prefix /opt/pinpool-staged
staged_pc=$work/stage/opt/pinpool-staged/$libdir/pkgconfig/pinpool.pc
[[ -f $staged_pc ]] || fail "DESTDIR install did not write $staged_pc"
grep -qx 'prefix=/opt/pinpool-staged' "$staged_pc" || { cat "$staged_pc" >&2; fail "staged pinpool.pc has the wrong prefix"; }
[[ ! -e /opt/pinpool-staged ]] || fail "DESTDIR install wrote outside DESTDIR"
echo "staged pinpool.pc says prefix=/opt/pinpool-staged"

echo "packaging: all consumers OK"
