#!/bin/sh
# Makes pinpool's private copy of jemalloc from Debian's libjemalloc_pic.a:
#  - drops jemalloc_cpp (its operator new/delete must never serve pinpool's own C++ allocations),
#  - renames every public symbol X (malloc, free, mallocx, malloc_conf, ...) to pinpool_je_X,
#  - makes it read its options from $PINPOOL_JEC and /etc/pinpool.jec instead of $MALLOC_CONF and
#    /etc/malloc.conf (same lengths, patched in place), so the application's jemalloc settings
#    can neither tune nor abort pinpool's heap,
# so nothing in it can stand in for, or be mistaken for, the application's allocator. The library then links it with
# -Wl,--exclude-libs so even the renamed and internal (je_*) symbols stay hidden.
# usage: make-private-jemalloc.sh <libjemalloc_pic.a> <out.a>
set -eu
in=$1 out=$2
work=$(mktemp -d "${out}.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
ar x "$in"
rm -f jemalloc_cpp.pic.o
perl -0777 -pi -e 's/\0MALLOC_CONF\0/\0PINPOOL_JEC\0/g; s{\0/etc/malloc\.conf\0}{\0/etc/pinpool.jec\0}g' \
  jemalloc.pic.o
for s in PINPOOL_JEC /etc/pinpool.jec; do
  grep -qaF "$s" jemalloc.pic.o || { echo "make-private-jemalloc: could not rename $s" >&2; exit 1; }
done
if strings -a jemalloc.pic.o | grep -qxE 'MALLOC_CONF|/etc/malloc\.conf'; then
  echo "make-private-jemalloc: MALLOC_CONF or /etc/malloc.conf is still read" >&2
  exit 1
fi
nm --defined-only -g ./*.o | awk 'NF == 3 && $3 !~ /^je_/ && $3 !~ /^DW\./ { print $3 " pinpool_je_" $3 }' \
  | sort -u > redefine.map
[ -s redefine.map ] || { echo "make-private-jemalloc: no public symbols found in $in" >&2; exit 1; }
for o in ./*.o; do objcopy --redefine-syms=redefine.map "$o"; done
rm -f "$out"
ar rcs "$out" ./*.o
