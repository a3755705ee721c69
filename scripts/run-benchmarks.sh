#!/usr/bin/env bash
# Runs every comparison benchmark of pinpool against its alternatives and writes
# docs/benchmarks.md with tables and PNG figures (docs/benchmarks/*.png):
#
#   scripts/run-benchmarks.sh [--build-dir DIR] [--source DIR] [--quick] [--no-guest]
#
#   --build-dir DIR  where to build (default build-bench); results go to DIR/bench-results/
#   --source DIR     source tree to build (default: this repository's working tree)
#   --quick          a few seconds per benchmark instead of minutes (figures too noisy to quote)
#   --no-guest       skip the soft-RoCE guest (RDMA-ready buffers, data path, verbs growth)
#   --report DIR     measure nothing: rewrite the page from an earlier run's results directory
#                    (after editing bench/report.py or bench/benchmarks-notes.md)
#
# On the host: alloc_compare_benchmark (allocation: pair, batch, windows of outstanding blocks,
# producer/consumer; sized and by-address frees), growth_benchmark (long-term pin, mlock and
# io_uring), overhead_benchmark. In ONE soft-RoCE guest (scripts/softroce/run-in-guest.sh):
# bench/guest-benchmarks.sh (rdma_ready_benchmark, wire_benchmark, perftest's ib_write_bw,
# remote_access_benchmark, growth_benchmark on verbs). Then bench/report.py writes the page and plots them with gnuplot.
#
# Huge pages: sets /proc/sys/vm/nr_hugepages (2 MiB) and one 1 GiB page for the growth runs and
# restores both on exit, however it exits. Needs root for that (else the hugetlb rows report the
# pool's "no huge pages" error). Keep the machine otherwise quiet: the page records the load
# average before and after each phase.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
invocation="scripts/run-benchmarks.sh${*:+ $*}"
build_dir=$repo/build-bench
source_dir=$repo
quick=""
guest=1
report_only=""

while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build_dir=$(realpath -m "$2"); shift 2 ;;
    --source) source_dir=$(realpath "$2"); shift 2 ;;
    --quick) quick=quick; shift ;;
    --no-guest) guest=0; shift ;;
    --report) report_only=$(realpath "$2"); shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "run-benchmarks: unknown argument $1 (see --help)" >&2; exit 1 ;;
  esac
done

if [ -n "$report_only" ]; then
  python3 "$repo/bench/report.py" --results "$report_only" --command "(see machine.txt)" \
    --markdown "$repo/docs/benchmarks.md" --figures "$repo/docs/benchmarks"
  echo "run-benchmarks: rewrote docs/benchmarks.md from $report_only" >&2
  exit 0
fi

for tool in cmake ninja python3 gnuplot; do
  command -v $tool >/dev/null || {
    echo "run-benchmarks: $tool missing: run scripts/setup-deps.sh" >&2; exit 1; }
done
if [ $guest = 1 ]; then
  for tool in qemu-system-x86_64 ib_write_bw; do
    command -v $tool >/dev/null || {
      echo "run-benchmarks: $tool missing: run scripts/setup-deps.sh and" \
        "scripts/setup-vm-deps.sh (or pass --no-guest)" >&2; exit 1; }
  done
fi

stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=$build_dir/bench-results/$stamp
mkdir -p "$out"
log() { echo "run-benchmarks: $*" >&2; }
load() { echo "$1 $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/load.txt"; }

# --- huge pages: set for the growth runs, always restored ------------------------------------
hp2=/proc/sys/vm/nr_hugepages
hp1=/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages
saved_hp2=$(cat $hp2)
saved_hp1=$(cat $hp1 2>/dev/null || echo "")
restore_hugepages() {
  echo "$saved_hp2" > $hp2 2>/dev/null || true
  [ -z "$saved_hp1" ] || echo "$saved_hp1" > $hp1 2>/dev/null || true
}
trap restore_hugepages EXIT INT TERM HUP

# --- build -------------------------------------------------------------------------------------
targets=(alloc_compare_benchmark rdma_ready_benchmark wire_benchmark growth_benchmark
         growth_latency_benchmark startup_benchmark
         overhead_benchmark remote_access_benchmark providers_benchmark)
log "building ${targets[*]} in $build_dir from $source_dir"
cmake -S "$source_dir" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPINPOOL_BUILD_EXAMPLES=OFF > "$out/cmake.log"
nice -n 5 ninja -C "$build_dir" -j2 "${targets[@]}" > "$out/build.log"
bench=$build_dir/bench

# --- what was measured, on what ----------------------------------------------------------------
{
  echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "command=$invocation"
  # A --source snapshot (e.g. `git archive HEAD` plus bench/) may carry its commit in .commit.
  echo "commit=$(cut -c1-7 "$source_dir/.commit" 2>/dev/null ||
                 git -C "$source_dir" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "dirty=$(git -C "$source_dir" status --porcelain -- src include bench 2>/dev/null | wc -l)"
  echo "cpu_model=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
  echo "cpus=$(nproc)"
  echo "memory_gib=$(awk '/MemTotal/ {printf "%.0f", $2 / 1048576}' /proc/meminfo)"
  echo "kernel=$(uname -r)"
  echo "os=Debian $(cat /etc/debian_version)"
  echo "thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled)"
  echo "quick=${quick:-no}"
  for p in libjemalloc2 libmimalloc2.0 libgoogle-perftools4 libtcmalloc-minimal4 libucx0 \
           libfabric1 perftest rdma-core qemu-system-x86; do
    echo "pkg_$p=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || echo none)"
  done
} > "$out/machine.txt"

if [ "$quick" = quick ]; then
  reps=1 min_time=0.02 growth_mib=64 live_mib=32
else
  reps=5 min_time=0.1 growth_mib=1024 live_mib=512
fi
common=(--benchmark_repetitions=$reps --benchmark_report_aggregates_only=true
        --benchmark_format=json)

# --- host -----------------------------------------------------------------------------------
load alloc_start
log "allocation (alloc_compare_benchmark: every shape, both free flavours)"
"$bench/alloc_compare_benchmark" "${common[@]}" --benchmark_min_time=$min_time \
  --benchmark_enable_random_interleaving=true \
  --benchmark_out="$out/alloc.json" --benchmark_out_format=json > /dev/null
load alloc_end

log "growth on the host (growth_benchmark: long-term pin, mlock, io_uring)"
# 2 MiB pages for the whole total plus slack; one 1 GiB page (may be refused: reported).
echo $(( growth_mib / 2 + 64 )) > $hp2 || true
[ -z "$saved_hp1" ] || echo $(( saved_hp1 + 1 )) > $hp1 2>/dev/null || true
echo "hugepages_2M=$(cat $hp2) hugepages_1G=$(cat $hp1 2>/dev/null || echo n/a)" > "$out/hugepages.txt"
load growth_start
PINPOOL_BENCH_GROWTH_MIB=$growth_mib "$bench/growth_benchmark" \
  --benchmark_repetitions=$(( reps > 3 ? 3 : reps )) --benchmark_report_aggregates_only=true \
  --benchmark_format=json --benchmark_min_time=$min_time \
  --benchmark_out="$out/growth_host.json" --benchmark_out_format=json > /dev/null
load growth_end
restore_hugepages
echo "growth_mib=$growth_mib" >> "$out/hugepages.txt"

log "growth at scale on the host (growth_latency_benchmark, startup_benchmark)"
# Allocation latency while the pool grows, with a low watermark and without; start-up GB/s of a
# 1 GiB pool (2 MiB pages for all of it, plus slack), sequential vs parallel.
load scale_start
PINPOOL_BENCH_GROWTH_CHUNKS=$([ "$quick" = quick ] && echo 4 || echo 16) \
  "$bench/growth_latency_benchmark" --benchmark_format=json \
  --benchmark_out="$out/growth_latency_host.json" --benchmark_out_format=json > /dev/null
echo $(( 1024 / 2 + 64 )) > $hp2 || true
PINPOOL_BENCH_STARTUP_MIB=$([ "$quick" = quick ] && echo 256 || echo 1024) \
  "$bench/startup_benchmark" --benchmark_repetitions=$(( reps > 3 ? 3 : reps )) \
  --benchmark_report_aggregates_only=true --benchmark_format=json --benchmark_min_time=$min_time \
  --benchmark_out="$out/startup_host.json" --benchmark_out_format=json > /dev/null
restore_hugepages
load scale_end

log "memory overhead (overhead_benchmark)"
PINPOOL_BENCH_LIVE_MIB=$live_mib "$bench/overhead_benchmark" --benchmark_format=json \
  --benchmark_out="$out/overhead.json" --benchmark_out_format=json > /dev/null

# --- soft-RoCE guest ----------------------------------------------------------------------
if [ $guest = 1 ]; then
  load guest_start
  log "RDMA-ready buffers, data path, verbs growth in the soft-RoCE guest (minutes under TCG)"
  "$repo/scripts/softroce/run-in-guest.sh" --timeout 2400 -- \
    "$source_dir/bench/guest-benchmarks.sh" "$bench" "$out/guest" $quick
  load guest_end
fi

# --- the page ----------------------------------------------------------------------------------
log "writing docs/benchmarks.md and docs/benchmarks/*.png"
python3 "$source_dir/bench/report.py" --results "$out" --command "$invocation" \
  --markdown "$repo/docs/benchmarks.md" --figures "$repo/docs/benchmarks"
log "done: docs/benchmarks.md (raw results in $out)"
