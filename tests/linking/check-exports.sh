#!/usr/bin/env bash
# check-exports.sh: fails if a shared library could take over an application's allocator, or if
# one of pinpool's libraries exports more than its public API.
# Check (b) of the "linking pinpool does not change the application's malloc" proof (the runtime
# checks are malloc_unchanged.cc). It inspects the dynamic symbol table (`nm -D --defined-only`)
# and the NEEDED entries (`readelf -d`) and reports, one line each:
#   - any exported malloc-family entry point (malloc, free, ..., mallocx, mallctl, malloc_conf);
#   - any exported jemalloc internal or renamed symbol (je_*, pinpool_je_*);
#   - any exported global operator new/delete (_Znwm, _Znam, _ZdlPv, _ZdaPv and variants);
#   - a NEEDED dependency on a malloc replacement (libjemalloc, libtcmalloc, libmimalloc).
# For pinpool's own libraries (named by the file, or by the second argument) it also checks that
# the library exports its public API and nothing else:
#   library               its API (demangled, in pinpool::abi_vN)   must export
#   libpinpool.*          pinpool::*, pinpool_* (the C API)        pinpool::Pool::Create
#   libpinpool_ucx.*      pinpool::Ucx*, ToUcxPeerBlock            pinpool::UcxDomain::Wrap
#   libpinpool_fabric.*   pinpool::Fabric*, ToFabricRemote,        pinpool::FabricDomain::Wrap
#                         DescribeGrants (its FabricGrant one)
# and that every symbol it exports sits in one of its version nodes (PINPOOL_*: docs/abi.md).
# (the required symbol is there so that a stripped or empty library cannot pass by exporting
# nothing), and reports
#   - any pinpool::internal name anywhere in a demangled symbol (a signature naming an internal
#     type counts), or a member of a class's private implementation (pinpool::<Class>::Impl, as
#     FabricRemoteAccess::Impl): "exports an internal symbol";
#   - any std::, absl:: or __gnu_cxx:: symbol (a template instance, its typeinfo or vtable: the
#     library's own use of the standard library or Abseil, which its public headers do not
#     need): "exports a std::/absl:: template instance";
#   - any other symbol outside the API but its typeinfo and vtables: "exports a symbol outside
#     its public API" (for an provider: the core's names too, e.g. Domain's vtable or an
#     instance of provider.h's ChunkHandles).
# usage: check-exports.sh <library.so> [<library name for the rules>]
#        exit 0: clean; 1: offending symbols; 2: usage/tools
set -euo pipefail

lib=${1:?usage: check-exports.sh <library.so> [<library name for the rules>]}
rules=${2:-$(basename "$lib")}
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

# "nm -D" prints "<address> <type> <name>[@version]" for defined symbols; the version nodes
# themselves are absolute symbols (type A), not exports.
exports=$("$nm" -D --defined-only "$lib" | awk 'NF >= 3 && $2 != "A" { sub(/@.*/, "", $3); print $3 }' | sort -u)
unversioned=$("$nm" -D --defined-only "$lib" | awk 'NF >= 3 && $2 != "A" && $3 !~ /@PINPOOL_/ { print $3 }')
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

api=""
ns='pinpool::abi_v[0-9]+::'
mangled_ns='_ZN7pinpool[0-9]+abi_v[0-9]+'
case $rules in
  libpinpool.*) api="$ns|pinpool_" required="^${mangled_ns}4Pool6Create" what='pinpool::Pool::Create' ;;
  libpinpool_ucx.*)
    api="$ns(Ucx|ToUcxPeerBlock\\()" required="^${mangled_ns}9UcxDomain4Wrap"
    what='pinpool::UcxDomain::Wrap' ;;
  libpinpool_fabric.*)
    api="$ns(Fabric|ToFabricRemote\\(|DescribeGrants\\(${ns}Array const&, std::span<${ns}FabricGrant)"
    required="^${mangled_ns}12FabricDomain4Wrap"
    what='pinpool::FabricDomain::Wrap' ;;
esac
if [[ -n $api ]]; then
  while read -r sym; do
    [[ -n $sym ]] && report "exports a symbol in no version node: $sym"
  done <<<"$unversioned"
  if ! grep -qE "$required" <<<"$exports"; then
    report "does not export $what: is this really $rules?"
  fi
  demangled=$("$nm" -DC --defined-only "$lib" |
    awk 'NF >= 3 && $2 != "A" { $1 = ""; $2 = ""; sub(/^  /, ""); sub(/@+PINPOOL_[A-Z_]*[0-9]+$/, ""); print }')
  special='(typeinfo|typeinfo name|vtable|VTT|construction vtable|guard variable) for '
  while read -r sym; do
    [[ -n $sym ]] || continue
    if [[ $sym == *pinpool::internal* || $sym =~ pinpool::[A-Za-z_:]*::Impl(::|\(|$) ]]; then
      report "exports an internal symbol: $sym"
    elif grep -qE "^($special)?(std|absl|__gnu_cxx)::" <<<"$sym"; then
      report "exports a std::/absl:: template instance: $sym"
    elif ! grep -qE "^((typeinfo|typeinfo name|vtable) for )?($api)" <<<"$sym"; then
      report "exports a symbol outside its public API: $sym"
    fi
  done <<<"$demangled"
fi

count=$(grep -c . <<<"$exports" || true)
if [[ $bad -ne 0 ]]; then
  echo "check-exports: FAILED: $lib ($count exported symbols)"
  exit 1
fi
scope=""
[[ -z $api ]] || scope="; only its public API (no internal, std:: or absl:: symbol)"
echo "check-exports: OK: $lib exports $count symbols, no allocator entry point, no jemalloc or"\
  "operator new/delete symbol, no malloc replacement among its NEEDED libraries$scope"
