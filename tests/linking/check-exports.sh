#!/usr/bin/env bash
# check-exports.sh: fails if a shared library could take over an application's allocator.
# Check (b) of the "linking pinpool does not change the application's malloc" proof (the runtime
# checks are malloc_unchanged.cc). It inspects the dynamic symbol table (`nm -D --defined-only`)
# and the NEEDED entries (`readelf -d`) and reports, one line each:
#   - any exported malloc-family entry point (malloc, free, ..., mallocx, mallctl, malloc_conf);
#   - any exported jemalloc internal or renamed symbol (je_*, pinpool_je_*);
#   - any exported global operator new/delete (_Znwm, _Znam, _ZdlPv, _ZdaPv and variants);
#   - a NEEDED dependency on a malloc replacement (libjemalloc, libtcmalloc, libmimalloc).
# For a libpinpool.* it also requires pinpool::Pool::Create to be exported, so that a stripped or
# empty library cannot pass by exporting nothing, and that it exports nothing but its public API:
# no pinpool::internal name anywhere in a demangled symbol (a signature naming an internal type
# counts), and no symbol outside pinpool:: and pinpool_* (the C API) but their typeinfo/vtables.
# usage: check-exports.sh <library.so>        exit 0: clean; 1: offending symbols; 2: usage/tools
set -euo pipefail

lib=${1:?usage: check-exports.sh <library.so>}
nm=${NM:-nm}
readelf=${READELF:-readelf}
[[ -f $lib ]] || { echo "check-exports: no such file: $lib" >&2; exit 2; }

forbidden_names=(
  malloc free calloc realloc reallocarray memalign valloc pvalloc posix_memalign aligned_alloc
  malloc_usable_size cfree mallinfo mallinfo2 mallopt malloc_trim malloc_stats malloc_info
  mallocx dallocx sdallocx rallocx sallocx nallocx xallocx
  mallctl mallctlbymib mallctlnametomib malloc_conf malloc_message malloc_stats_print
)
# je_*: jemalloc internals; pinpool_je_*: pinpool's renamed copy (must stay hidden too);
# operator new/new[] (_Znwm/_Znam...) and delete/delete[] (_ZdlPv/_ZdaPv...), every variant.
forbidden_patterns='^(je_|pinpool_je_|_Zn[wa]m|_Zd[la]Pv)'

# "nm -D" prints "<address> <type> <name>[@version]" for defined symbols.
exports=$("$nm" -D --defined-only "$lib" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' | sort -u)
bad=0
report() {
  echo "check-exports: $lib $*"
  bad=1
}

for name in "${forbidden_names[@]}"; do
  if grep -qxF -- "$name" <<<"$exports"; then report "exports forbidden symbol $name"; fi
done
while read -r name; do
  if [[ -n $name ]]; then report "exports forbidden symbol $name"; fi
done < <(grep -E -- "$forbidden_patterns" <<<"$exports" || true)

while read -r needed; do
  case $needed in
    libjemalloc* | libtcmalloc* | libmimalloc*) report "depends on malloc replacement $needed" ;;
  esac
done < <("$readelf" -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')

if [[ $(basename "$lib") == libpinpool.* ]]; then
  if ! grep -q '^_ZN7pinpool4Pool6Create' <<<"$exports"; then
    report "does not export pinpool::Pool::Create: is this really libpinpool?"
  fi
  demangled=$("$nm" -DC --defined-only "$lib" | awk 'NF >= 3 { $1 = ""; $2 = ""; sub(/^  /, ""); print }')
  while read -r name; do
    if [[ -n $name ]]; then report "exports an internal symbol: $name"; fi
  done < <(grep -F 'pinpool::internal' <<<"$demangled" || true)
  while read -r name; do
    if [[ -n $name ]]; then report "exports a symbol outside its public API: $name"; fi
  done < <(grep -vE '^(pinpool::|pinpool_|(typeinfo|typeinfo name|vtable) for pinpool::)' <<<"$demangled" || true)
fi

count=$(grep -c . <<<"$exports" || true)
if [[ $bad -ne 0 ]]; then
  echo "check-exports: FAILED: $lib ($count exported symbols)"
  exit 1
fi
echo "check-exports: OK: $lib exports $count symbols, no allocator entry point, no jemalloc or"\
  "operator new/delete symbol, no malloc replacement among its NEEDED libraries"
