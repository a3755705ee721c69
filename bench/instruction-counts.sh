#!/usr/bin/env bash
# Instructions per allocate + free pair, pinpool's forms against tcmalloc, mimalloc and glibc,
# counted by valgrind's callgrind (deterministic: the same build gives the same counts on a busy
# machine). Prints a Markdown table: one row per size, one column per allocator form, and the
# ratio of pinpool's forms to tcmalloc's (sized to sized, by address to by address); a last row
# counts a step of the small window (instructions_benchmark: one free and one allocation).
#
#   bench/instruction-counts.sh [--smoke] [--pairs N] [PROGRAM]
#
#   PROGRAM   the built instructions_benchmark (default build/bench/instructions_benchmark)
#   --pairs N pairs counted per case (default 100000; the count per pair is exact to within the
#             few instructions of collection's on/off switch, divided by N)
#   --smoke   a few pairs of two sizes; checks that every case produced a count (ctest)
# Exits 77 (ctest's skip) when valgrind is not installed: scripts/setup-deps.sh installs it.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
program=$repo/build/bench/instructions_benchmark
pairs=100000
sizes=${PINPOOL_COUNT_SIZES:-64,256,1024,4096,16384,65536}
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) pairs=2000; sizes=64,16384; shift ;;
    --pairs) pairs=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) program=$1; shift ;;
  esac
done

if ! command -v valgrind >/dev/null 2>&1; then
  echo "SKIP: valgrind is not installed (scripts/setup-deps.sh installs it); no instruction counts"
  exit 77
fi
[ -x "$program" ] || { echo "no program at $program (build instructions_benchmark)" >&2; exit 2; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Collection is off except around each loop; every case dumps its counts under its name.
valgrind --tool=callgrind --collect-atstart=no --dump-instr=no \
  --callgrind-out-file="$out/cg.%p" "$program" --pairs="$pairs" --sizes="$sizes" \
  >"$out/stdout" 2>"$out/stderr" || {
  cat "$out/stderr" >&2
  exit 1
}

# Each dump: "desc: Trigger: Client Request: <case>" and "totals: <instructions>".
for f in "$out"/cg.*.*; do
  awk '/^desc: Trigger: Client Request: / { name = $5 }
       /^totals: / { print name, $2 }' "$f"
done | sort -u >"$out/counts"

expected=$(grep -c ' pairs$' "$out/stdout")
got=$(wc -l <"$out/counts")
if [ "$got" -ne "$expected" ] || [ "$got" -eq 0 ]; then
  echo "FAIL: $expected cases ran but $got counts were dumped" >&2
  cat "$out/stderr" >&2
  exit 1
fi

python3 - "$out/counts" "$pairs" "$sizes" <<'EOF'
import sys
counts, pairs, sizes = sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3].split(',')]
per = {}
for line in open(counts):
    name, total = line.split()
    alloc, form, size = name.split('/')
    per[(alloc + '/' + form, size if size == 'w16' else int(size))] = int(total) / pairs
columns = ['pinpool/block', 'pinpool/sized', 'pinpool/address', 'pinpool/c',
           'classes/default', 'classes/named', 'classes/on_reuse', 'classes/on_class_change',
           'tcmalloc/sized', 'tcmalloc/address', 'mimalloc/sized', 'mimalloc/address',
           'glibc/address', 'loop/-']
columns = [c for c in columns if any((c, s) in per for s in sizes)]
def size_name(s):
    if s == 'w16':
        return 'window 64 B-1 KiB, W=16 (a step)'
    return f'{s >> 10} KiB' if s >= 1024 and s % 1024 == 0 else f'{s} B'
def ratio(a, b):
    return f'{a / b:.2f}' if a is not None and b else '-'
head = ['size'] + columns + ['block / tc sized', 'sized / tc sized', 'address / tc address',
                             'c / tc address']
print('| ' + ' | '.join(head) + ' |')
print('|' + '---|' * len(head))
if any(k[1] == 'w16' for k in per):
    sizes.append('w16')  # the small window's steps, each a free and an allocation
for s in sizes:
    row = [size_name(s)]
    for c in columns:
        v = per.get((c, s))
        row.append(f'{v:.1f}' if v is not None else '-')
    g = lambda c: per.get((c, s))
    row += [ratio(g('pinpool/block'), g('tcmalloc/sized')),
            ratio(g('pinpool/sized'), g('tcmalloc/sized')),
            ratio(g('pinpool/address'), g('tcmalloc/address')),
            ratio(g('pinpool/c'), g('tcmalloc/address'))]
    print('| ' + ' | '.join(row) + ' |')
print(f'\ninstructions per allocate + free pair, {pairs} pairs a case, loop included '
      f'(loop/-: the loop alone)')
EOF
