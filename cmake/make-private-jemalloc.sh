#!/bin/sh
# Makes pinpool's private copy of jemalloc from Debian's libjemalloc_pic.a:
#  - drops jemalloc_cpp (its operator new/delete must never serve pinpool's own C++ allocations),
#  - renames every public symbol X (malloc, free, mallocx, malloc_conf, ...) to pinpool_je_X,
# so nothing in it can stand in for the application's malloc. The library then links it with
# -Wl,--exclude-libs so even the renamed and internal (je_*) symbols stay hidden.
# usage: make-private-jemalloc.sh <libjemalloc_pic.a> <out.a>
set -eu
in=$1 out=$2
work=$(mktemp -d "${out}.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
ar x "$in"
rm -f jemalloc_cpp.pic.o
nm --defined-only -g ./*.o | awk 'NF == 3 && $3 !~ /^je_/ && $3 !~ /^DW\./ { print $3 " pinpool_je_" $3 }' \
  | sort -u > redefine.map
[ -s redefine.map ] || { echo "make-private-jemalloc: no public symbols found in $in" >&2; exit 1; }
for o in ./*.o; do objcopy --redefine-syms=redefine.map "$o"; done
rm -f "$out"
ar rcs "$out" ./*.o
