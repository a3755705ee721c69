#!/usr/bin/env bash
# Third-party allocator benchmarks, unmodified, with malloc routed to glibc (no preload), tcmalloc
# (gperftools' libtcmalloc_minimal.so.4), mimalloc (libmimalloc.so.2) and pinpool (the preload
# shim, bench/preload_shim.cc: a benchmark device, docs/preload-shim.md), all in one run. Prints
# a Markdown table: the median of N runs per program, thread count and allocator, and pinpool
# against the fastest of the other three.
#
# The programs are mimalloc-bench's (its bench/ directory): larson, xmalloc-test, alloc-test,
# glibc-bench's bench-malloc-simple and bench-malloc-thread, mstress, cache-thrash and
# cache-scratch. None of their code is in this repository: `build` compiles them from a checkout
# of that project, as its own CMake build does (Release: -O3 -DNDEBUG).
#
#   bench/third-party.sh build SRC OUT   compile the programs from SRC (a mimalloc-bench checkout)
#                                        into OUT
#   bench/third-party.sh [options] DIR   run the programs in DIR
#     --runs N        runs per cell (default 3; the table shows the median)
#     --threads LIST  thread counts for programs that take one (default "1 2")
#     --only LIST     these programs only (names as in the table's first column)
#     --shim PATH     the preload shim (default build/bench/libpinpool_preload.so)
#     --before PATH   another build's shim, run interleaved with the others as a fifth column
#                     ("pinpool before"), with pinpool's ratio to it: a change measured in the
#                     same run as the peers
#     --logs DIR      keep every run's output there (default: a temporary directory, removed
#                     when every run was correct)
#
# Arguments are those of mimalloc-bench's bench.sh with its `procs` set to the thread count;
# glibc-simple takes no thread count. Times: the program's own "relative time" where bench.sh
# reads one (larson, xmalloc-test; glibc-thread's is 10^9 / iterations), else wall-clock seconds.
# Lower is better in every column.
#
# Correctness of every run: exit status 0, the line the program prints when it finished (where it
# prints one), no loader message (a preload that did not happen) and no "corruption" on its
# output; a failed run shows as FAIL in its cell, its output is kept, and the script exits 1.
# Programs that call fork() are skipped under pinpool, saying so: the shim's pool is pinned memory
# marked MADV_DONTFORK, so a child would have no heap (the shim aborts it).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() { sed -n '2,35p' "$0"; exit 2; }

# --- build -----------------------------------------------------------------------------------------
if [ "${1:-}" = build ]; then
  [ $# -eq 3 ] || usage
  src=$(cd "$2" && pwd)/bench
  out=$3
  [ -f "$src/larson/larson.cpp" ] || { echo "$2 is not a mimalloc-bench checkout" >&2; exit 2; }
  mkdir -p "$out"
  cflags=(-O3 -DNDEBUG -w)
  set -x
  g++ "${cflags[@]}" -std=c++17 -DCPP=1 "$src/larson/larson.cpp" -o "$out/larson" -lpthread
  g++ "${cflags[@]}" -std=c++17 -DBENCH=4 "$src/alloc-test/test_common.cpp" \
    "$src/alloc-test/allocator_tester.cpp" -o "$out/alloc-test" -lpthread
  gcc "${cflags[@]}" "$src/xmalloc-test/xmalloc-test.c" -o "$out/xmalloc-test" -lpthread
  gcc "${cflags[@]}" "$src/glibc-bench/bench-malloc-simple.c" -o "$out/glibc-simple" -lpthread
  gcc "${cflags[@]}" "$src/glibc-bench/bench-malloc-thread.c" -o "$out/glibc-thread" -lpthread
  gcc "${cflags[@]}" "$src/mstress/mstress.c" -o "$out/mstress" -lpthread
  g++ "${cflags[@]}" -std=c++17 "$src/cache-thrash/cache-thrash.cpp" -o "$out/cache-thrash" \
    -lpthread
  g++ "${cflags[@]}" -std=c++17 "$src/cache-scratch/cache-scratch.cpp" -o "$out/cache-scratch" \
    -lpthread
  exit 0
fi

# --- run -------------------------------------------------------------------------------------------
runs=3
threads="1 2"
only=""
shim=$repo/build/bench/libpinpool_preload.so
logs=""
before=""
while [ $# -gt 1 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --shim) shim=$2; shift 2 ;;
    --before) before=$2; shift 2 ;;
    --logs) logs=$2; shift 2 ;;
    *) usage ;;
  esac
done
[ $# -eq 1 ] || usage
dir=$(cd "$1" && pwd)
[ -f "$shim" ] || { echo "no preload shim at $shim (build the pinpool_preload target)" >&2; exit 2; }
[ -z "$before" ] || [ -f "$before" ] || { echo "no preload shim at $before" >&2; exit 2; }
shim=$(cd "$(dirname "$shim")" && pwd)/$(basename "$shim")

allocators=(glibc tcmalloc mimalloc pinpool)
[ -z "$before" ] || allocators+=(before)
preload_of() {
  case "$1" in
    glibc) echo "" ;;
    tcmalloc) echo libtcmalloc_minimal.so.4 ;;
    mimalloc) echo libmimalloc.so.2 ;;
    pinpool) echo "$shim" ;;
    before) echo "$before" ;;
  esac
}
for lib in libtcmalloc_minimal.so.4 libmimalloc.so.2; do
  ldconfig -p | grep -F "$lib" >/dev/null ||
    { echo "$lib is not installed (libtcmalloc-minimal4, libmimalloc2.0)" >&2; exit 2; }
done

# name | program | arguments (T: the thread count; none: runs once) | metric | finished line
programs=(
  "larson|larson|5 8 1000 5000 100 4141 T|larson|relative time:"
  "xmalloc-test|xmalloc-test|-w T -t 5 -s 64|xmalloc|^rtime:"
  "alloc-test|alloc-test|T|wall|alloc/dealloc operations in"
  "glibc-simple|glibc-simple||wall|"
  "glibc-thread|glibc-thread|T|glibc-thread|iterations$"
  "mstress|mstress|T 50 25|wall|^start with"
  "cache-thrash|cache-thrash|T 1000 1 2000000 T|wall|"
  "cache-scratch|cache-scratch|T 1000 1 2000000 T|wall|"
)

keep_logs=1
if [ -z "$logs" ]; then
  logs=$(mktemp -d /tmp/third-party.XXXXXX)
  keep_logs=0
fi
mkdir -p "$logs"

# The shim's columns: pinpool, and the build it is compared with.
is_shim() { [ "$1" = pinpool ] || [ "$1" = before ]; }
# a / b, as the tables print ratios.
ratio_of() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# Why a program cannot run on the shim, or nothing: it calls fork() (daemon() forks too).
fork_reason() {
  local imports
  imports=$(nm -D --undefined-only "$1" 2>/dev/null | awk '{print $NF}' | sed 's/@.*//')
  for f in fork _Fork daemon forkpty; do
    if grep -qx "$f" <<<"$imports"; then
      echo "calls $f(): a child would have no heap (pool chunks are MADV_DONTFORK)"
      return
    fi
  done
}

# One run: prints its time, or FAIL. Output in $logs/<name>-t<T>-<allocator>-<i>.txt.
run_once() {
  local name=$1 prog=$2 args=$3 metric=$4 finished=$5 alloc=$6 log=$7
  local preload t0 t1 status=0
  preload=$(preload_of "$alloc")
  t0=$EPOCHREALTIME
  # shellcheck disable=SC2086 # args are words
  env ${preload:+LD_PRELOAD=$preload} "$dir/$prog" $args >"$log" 2>&1 </dev/null || status=$?
  t1=$EPOCHREALTIME
  if [ "$status" -ne 0 ] || grep -q -E "ld\.so|cannot be preloaded|corruption" "$log" ||
    { [ -n "$finished" ] && ! grep -q -E "$finished" "$log"; }; then
    echo "FAIL"
    echo "$name $alloc: exit status $status, output in $log" >&2
    return
  fi
  case "$metric" in
    wall) awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }' ;;
    larson) sed -n 's/.*relative time: \([0-9.]*\)s.*/\1/p' "$log" | head -1 ;;
    xmalloc) sed -n 's/^rtime: \([0-9.]*\).*/\1/p' "$log" | head -1 ;;
    glibc-thread)
      awk '/iterations$/ { printf "%.3f", 1e9 / $1 }' "$log" ;;
  esac
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END {
  if (NR == 0) { print "-"; exit }
  if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
failed=0
rows=()
skipped=()
for entry in "${programs[@]}"; do
  IFS='|' read -r name prog args metric finished <<<"$entry"
  if [ -n "$only" ] && ! grep -qw -- "$name" <<<"$only"; then continue; fi
  [ -x "$dir/$prog" ] || { echo "no $prog in $dir (bench/third-party.sh build)" >&2; exit 2; }
  skip=$(fork_reason "$dir/$prog")
  if [ -n "$skip" ]; then
    skipped+=("$name: skipped under pinpool: it $skip.")
    echo "${skipped[-1]}" >&2
  fi
  counts=$threads
  [[ "$args" == *T* ]] || counts=1
  for t in $counts; do
    targs=${args//T/$t}
    declare -A cell=()
    for i in $(seq "$runs"); do
      for alloc in "${allocators[@]}"; do  # interleaved: load changes hit every allocator alike
        is_shim "$alloc" && [ -n "$skip" ] && continue
        v=$(run_once "$name" "$prog" "$targs" "$metric" "$finished" "$alloc" \
          "$logs/$name-t$t-$alloc-$i.txt")
        [ "$v" = FAIL ] && failed=1
        cell[$alloc]="${cell[$alloc]:-} $v"
      done
    done
    shown="(none)"
    [ -z "$targs" ] || shown="\`$targs\`"
    line="| $name | $shown | $t |"
    best=""
    for alloc in "${allocators[@]}"; do
      if is_shim "$alloc" && [ -n "$skip" ]; then
        line+=" skipped (forks) |"
        continue
      fi
      if grep -q FAIL <<<"${cell[$alloc]}"; then
        line+=" FAIL |"
        m=FAIL
      else
        m=$(median <<<"${cell[$alloc]}")
        line+=" $m |"
      fi
      if ! is_shim "$alloc" && [ "$m" != FAIL ]; then
        if [ -z "$best" ] || awk -v a="$m" -v b="${best%% *}" 'BEGIN { exit !(a < b) }'; then
          best="$m $alloc"
        fi
      fi
      [ "$alloc" = pinpool ] && mine=$m
      [ "$alloc" = before ] && theirs=$m
    done
    if [ -n "$skip" ] || [ "$mine" = FAIL ] || [ -z "$best" ]; then
      line+=" - | - |"
    else
      ratio=$(ratio_of "$mine" "${best%% *}")
      ok=$(awk -v r="$ratio" 'BEGIN { print (r <= 1.25 ? "yes" : "no") }')
      line+=" ${ratio}x (${best#* }) | $ok |"
    fi
    if [ -n "$before" ]; then
      if [ -n "$skip" ] || [ "$mine" = FAIL ] || [ "$theirs" = FAIL ]; then
        line+=" - |"
      else
        line+=" $(ratio_of "$mine" "$theirs")x |"
      fi
    fi
    rows+=("$line")
    echo "$line" >&2
    unset cell
  done
done

echo
echo "Median of $runs runs, lower is better: the program's relative time where it reports one"
echo "(larson, xmalloc-test, glibc-thread), else wall-clock seconds. Load average (1/5/15 min):"
echo "$load_start at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end; $(nproc) CPUs."
echo
columns=(program arguments threads glibc tcmalloc mimalloc pinpool)
[ -z "$before" ] || columns+=("pinpool before")
columns+=("pinpool / fastest" "≤ 1.25x")
if [ -n "$before" ]; then
  columns+=("pinpool / before")
  echo "pinpool before: $before"
  echo
fi
printf '| %s ' "${columns[@]}"; echo "|"
printf '|---%.0s' "${columns[@]}"; echo "|"
printf '%s\n' "${rows[@]}"
if [ ${#skipped[@]} -gt 0 ]; then
  echo
  printf '%s\n' "${skipped[@]}"
fi
if [ "$failed" -ne 0 ]; then
  echo "Some runs FAILED: their output is in $logs" >&2
  exit 1
fi
[ "$keep_logs" -eq 1 ] || rm -rf "$logs"
