#!/usr/bin/env bash
# Packaging test of the optional provider libraries (ctest `packaging.providers`): installs this build
# tree into a fresh temporary prefix and proves that
#   1. each provider built (PINPOOL_PROVIDERS, e.g. "ucx fabric") installed its library, header, CMake
#      component and .pc file, and nothing of an provider that was not built is installed;
#   2. the core does not need them: libpinpool.so links neither UCX nor libfabric, and neither
#      pinpool.pc nor the core CMake package mentions them; with the providers' pkg-config files
#      hidden (as on a machine without libucx-dev / libfabric-dev), the core consumer
#      (tests/consumer/find_package) still configures, builds and runs, find_package with
#      COMPONENTS ucx fails saying what is missing, and OPTIONAL_COMPONENTS leaves
#      pinpool_<c>_FOUND false without failing;
#   3. an application uses the components: tests/consumer/providers built with find_package(pinpool
#      CONFIG COMPONENTS ...) and with pkg-config (pinpool-ucx, pinpool-fabric), loading the
#      libraries from the prefix, prints OK.
# Needs no network. Environment: as tests/consumer/run.sh, plus PINPOOL_PROVIDERS (the providers
# this tree built; empty: only the checks of 1 and 2 that need none).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../support/install-prefix.sh
source "$here/../support/install-prefix.sh" providers
read -r -a providers <<<"${PINPOOL_PROVIDERS:-}"
declare -A header=([ucx]=ucx.h [fabric]=fabric.h)
declare -A module=([ucx]=ucx [fabric]=libfabric)

step "installed layout"
for e in ucx fabric; do
  files=("$libdir/libpinpool_$e.so" "include/pinpool/${header[$e]}"
         "$libdir/cmake/pinpool/pinpool_${e}Targets.cmake" "$libdir/pkgconfig/pinpool-$e.pc")
  if [[ " ${providers[*]} " == *" $e "* ]]; then
    for f in "${files[@]}"; do [[ -e $prefix/$f ]] || fail "not installed: $f"; done
    echo "$e: ${files[*]}"
  else
    for f in "${files[@]}"; do [[ ! -e $prefix/$f ]] || fail "installed without its provider: $f"; done
    echo "$e: not built, nothing installed"
  fi
done

step "the core needs no provider"
needed=$(readelf -d "$prefix/$libdir/libpinpool.so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
if grep -E '^lib(ucp|uct|ucs|ucm|fabric)\.' <<<"$needed"; then
  fail "libpinpool.so links an provider"
fi
if grep -Eil 'ucx|ucp|fabric' "$prefix/$libdir/pkgconfig/pinpool.pc" \
  "$prefix/$libdir/cmake/pinpool/pinpoolTargets"*.cmake; then
  fail "the core package mentions an provider"
fi
echo "libpinpool.so needs: $(tr '\n' ' ' <<<"$needed")"

# pkg-config's own search path without the providers' files: a machine without their -dev packages.
hidden=$work/pkgconfig-without-providers
mkdir -p "$hidden"
IFS=: read -r -a pc_dirs <<<"$(pkg-config --variable pc_path pkg-config)"
for d in "${pc_dirs[@]}"; do
  for f in "$d"/*.pc; do
    [[ -e $f ]] || continue
    case $(basename "$f") in ucx*.pc | libfabric.pc) ;; *) ln -sf "$f" "$hidden/" ;; esac
  done
done
without_providers=(env PKG_CONFIG_LIBDIR="$hidden" PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig")
"${without_providers[@]}" pkg-config --exists ucx && fail "could not hide ucx.pc"

step "without the providers: the core consumer builds and runs"
quiet "${without_providers[@]}" "$cmake" -S "$here/find_package" -B "$work/core" -G "$generator" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix"
quiet "${without_providers[@]}" "$cmake" --build "$work/core"
out=$("$work/core/consumer_find_package") || fail "the core consumer exited $?"
[[ $out == *" consumer OK" ]] || fail "the core consumer did not print OK"
echo "$out"

step "without the providers: COMPONENTS ucx fails and says why; OPTIONAL_COMPONENTS does not"
for e in "${providers[@]}"; do
  if "${without_providers[@]}" "$cmake" -S "$here/providers" -B "$work/required-$e" -G "$generator" \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" \
    -DPINPOOL_CONSUMER_COMPONENTS="$e" >"$work/required-$e.log" 2>&1; then
    cat "$work/required-$e.log" >&2
    fail "find_package(pinpool COMPONENTS $e) succeeded without ${module[$e]}"
  fi
  grep -q "pinpool::$e needs ${module[$e]}" "$work/required-$e.log" ||
    { cat "$work/required-$e.log" >&2; fail "COMPONENTS $e failed without naming ${module[$e]}"; }
  echo "COMPONENTS $e: refused, naming ${module[$e]}"
done
quiet "${without_providers[@]}" "$cmake" -S "$here/providers" -B "$work/optional" -G "$generator" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" -DPINPOOL_CONSUMER_OPTIONAL=ON \
  -DPINPOOL_CONSUMER_COMPONENTS="ucx;fabric"
grep -q 'consumer: pinpool_ucx_FOUND=FALSE' "$work/last.log" || fail "optional ucx was found"
grep -q 'consumer: pinpool_fabric_FOUND=FALSE' "$work/last.log" || fail "optional fabric was found"
echo "OPTIONAL_COMPONENTS ucx fabric: the core found, both components not"

if [[ ${#providers[@]} -eq 0 ]]; then
  echo "packaging providers: no provider built, core checks OK"
  exit 0
fi
expected_libdir=$(realpath "$prefix/$libdir")
check_loads() {  # $1 executable: every libpinpool* it loads comes from the prefix
  local lib path
  for lib in libpinpool "${providers[@]/#/libpinpool_}"; do
    path=$(ldd "$1" | sed -n "s/^[[:space:]]*$lib\.so\.[0-9]* => \(.*\) (.*/\1/p")
    [[ -n $path ]] || fail "$1 does not load $lib"
    [[ $(dirname "$(realpath "$path")") == "$expected_libdir" ]] || fail "$1 loads $lib from $path"
  done
}

step "components consumer: find_package(pinpool CONFIG COMPONENTS ${providers[*]})"
quiet "$cmake" -S "$here/providers" -B "$work/components" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_PREFIX_PATH="$prefix" -DPINPOOL_CONSUMER_COMPONENTS="$(IFS=';'; echo "${providers[*]}")"
quiet "$cmake" --build "$work/components"
check_loads "$work/components/consumer_providers"
out=$("$work/components/consumer_providers") || fail "consumer_providers exited $?"
echo "$out"
[[ $out == *" providers consumer OK" ]] || fail "consumer_providers did not print OK"

step "components consumer: pkg-config ${providers[*]/#/pinpool-}"
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
modules=("${providers[@]/#/pinpool-}")
for m in "${modules[@]}"; do
  requires=$(pkg-config --print-requires "$m")
  grep -q "^pinpool = ${PINPOOL_VERSION:?}$" <<<"$requires" || fail "$m does not require pinpool $PINPOOL_VERSION"
  echo "$m requires: $(tr '\n' ' ' <<<"$requires")"
done
defines=()
for e in "${providers[@]}"; do defines+=("-DPINPOOL_CONSUMER_${e^^}=1"); done
# shellcheck disable=SC2046  # pkg-config's output is a list of flags
quiet "$cxx" -std=c++20 -Wall -Wextra -Werror "${defines[@]}" -o "$work/consumer_providers_pc" \
  "$here/providers/providers.cc" $(pkg-config --cflags --libs "${modules[@]}")
export LD_LIBRARY_PATH="$prefix/$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
check_loads "$work/consumer_providers_pc"
out=$("$work/consumer_providers_pc") || fail "consumer_providers (pkg-config) exited $?"
[[ $out == *" providers consumer OK" ]] || fail "consumer_providers (pkg-config) did not print OK"
echo "packaging providers: all OK"
