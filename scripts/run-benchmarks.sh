#!/usr/bin/env bash
# Runs every benchmark of pinpool against its alternatives, in one run, and writes
# docs/benchmarks.md with tables and PNG figures (docs/benchmarks/*.png):
#
#   scripts/run-benchmarks.sh [--build-dir DIR] [--source DIR] [--quick] [--no-guest]
#                             [--third-party DIR] [--report DIR]
#
#   --build-dir DIR    where to build (default build-bench); results go to DIR/bench-results/
#   --source DIR       source tree to build (default: this repository's working tree)
#   --quick            a few milliseconds per benchmark instead of seconds: checks that every
#                      part runs and the page is written; its figures are not results, and the
#                      page says so at its top
#   --no-guest         skip the soft-RoCE guest (RDMA-ready buffers, data path, grants, UCX and
#                      libfabric, verbs growth)
#   --third-party DIR  also run mimalloc-bench's programs through the preload shim
#                      (bench/third-party.sh; DIR holds them, built by `bench/third-party.sh build`)
#   --report DIR       measure nothing: rewrite the page from an earlier run's results directory
#                      (after editing bench/report.py or bench/report_sections/)
#
# On the host, in this order: alloc_compare_benchmark (allocation: pair, batch, windows of
# outstanding blocks, producer/consumer; sized and by-address frees), growth_benchmark (long-term
# pin, mlock and io_uring), growth_latency_benchmark and startup_benchmark, overhead_benchmark,
# bench/instruction-counts.sh (callgrind), io_uring_rings_benchmark and
# io_uring_zero_copy_benchmark, the Python package's alloc_benchmark.py and dataloader_benchmark.py,
# and bench/third-party.sh when asked. A part whose program this tree does not have (or cannot build
# here: valgrind, the Python package) is skipped, saying so in the log and on the page. Then in ONE
# soft-RoCE guest (scripts/softroce/run-in-guest.sh): bench/guest-benchmarks.sh
# (rdma_ready_benchmark, wire_benchmark, perftest's ib_write_bw, remote_access_benchmark,
# growth_benchmark and growth_latency_benchmark on verbs, providers_benchmark). Then
# bench/report.py writes the page and plots it with gnuplot.
#
# How long: about an hour and a half in all on a 2-CPU machine: the Release build (10-20 min from
# cold, less with ccache), the host's parts (about 30 min: allocation 8-10, instruction counts 5,
# growth and start-up 5, io_uring 5, Python 3), the guest (20-40 min under TCG; stopped at 40),
# and with --third-party about 15 min more. --quick: the build, then 10-20 min.
#
# Huge pages: sets /proc/sys/vm/nr_hugepages (2 MiB) and one 1 GiB page for the growth runs and
# restores both on exit, however it exits. Needs root for that (else the hugetlb rows report the
# pool's "no huge pages" error) and for the io_uring rings' per-ring registrations (16 times the
# pool under RLIMIT_MEMLOCK). Keep the machine otherwise quiet: the page records the time and the
# load average before and after each part.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
invocation="scripts/run-benchmarks.sh${*:+ $*}"
build_dir=$repo/build-bench
source_dir=$repo
quick=""
guest=1
report_only=""
third_party=""

while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build_dir=$(realpath -m "$2"); shift 2 ;;
    --source) source_dir=$(realpath "$2"); shift 2 ;;
    --quick) quick=quick; shift ;;
    --no-guest) guest=0; shift ;;
    --third-party) third_party=$(realpath "$2"); shift 2 ;;
    --report) report_only=$(realpath "$2"); shift 2 ;;
    -h|--help) sed -n '2,41p' "$0"; exit 0 ;;
    *) echo "run-benchmarks: unknown argument $1 (see --help)" >&2; exit 1 ;;
  esac
done

write_page() {
  python3 "$source_dir/bench/report.py" --results "$1" --command "$invocation" \
    --markdown "$repo/docs/benchmarks.md" --figures "$repo/docs/benchmarks"
}

if [ -n "$report_only" ]; then
  write_page "$report_only"  # the command that measured comes from its machine.txt
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
# Each part's start and end: the time and the load average, which the page states beside its
# figures.
load() { echo "$1 $(date -u +%Y-%m-%dT%H:%M:%SZ) $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/load.txt"; }
# A part not measured, and why: on the page too (skipped.txt).
skip() { log "skipping $1: $2"; echo "$1=$2" >> "$out/skipped.txt"; }

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
# Parts that this tree may not have (branches merge them in), or that this machine may not be able
# to build: built when their target exists.
optional=(instructions_benchmark io_uring_rings_benchmark io_uring_zero_copy_benchmark
          pinpool_python pinpool_preload)
log "configuring $build_dir from $source_dir"
cmake -S "$source_dir" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPINPOOL_BUILD_EXAMPLES=OFF > "$out/cmake.log"
known=$(ninja -C "$build_dir" -t targets all | cut -d: -f1)
has_target() { grep -qx "$1" <<<"$known"; }
for t in "${optional[@]}"; do
  if has_target "$t"; then targets+=("$t"); fi
done
log "building ${targets[*]}"
nice -n 5 ninja -C "$build_dir" -j2 "${targets[@]}" > "$out/build.log"
bin=$build_dir/bench

# --- what was measured, on what ----------------------------------------------------------------
{
  echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "command=$invocation"
  # A --source snapshot (e.g. `git archive HEAD` plus bench/) may carry its commit in .commit.
  echo "commit=$(cut -c1-7 "$source_dir/.commit" 2>/dev/null ||
                 git -C "$source_dir" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "dirty=$(git -C "$source_dir" status --porcelain -- src include bench python 2>/dev/null | wc -l)"
  echo "cpu_model=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
  echo "cpus=$(nproc)"
  echo "memory_gib=$(awk '/MemTotal/ {printf "%.0f", $2 / 1048576}' /proc/meminfo)"
  echo "kernel=$(uname -r)"
  echo "os=Debian $(cat /etc/debian_version)"
  echo "thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled)"
  echo "quick=${quick:-no}"
  for p in libjemalloc2 libmimalloc2.0 libgoogle-perftools4 libtcmalloc-minimal4 libucx0 \
           libfabric1 perftest rdma-core qemu-system-x86 liburing2 python3-numpy python3-torch \
           valgrind; do
    echo "pkg_$p=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || echo none)"
  done
} > "$out/machine.txt"

if [ "$quick" = quick ]; then
  reps=1 min_time=0.02 growth_mib=64 live_mib=32 steady_mib=128 pairs=5000 rings_mib=64 third_runs=1
else
  reps=5 min_time=0.1 growth_mib=1024 live_mib=512 steady_mib=800 pairs=100000 rings_mib=1024 third_runs=5
fi
echo "steady_mib=$steady_mib" >> "$out/machine.txt"
common=(--benchmark_repetitions=$reps --benchmark_report_aggregates_only=true
        --benchmark_format=json)

# --- host -----------------------------------------------------------------------------------
load alloc_start
log "allocation (alloc_compare_benchmark: every shape, both free flavours)"
"$bin/alloc_compare_benchmark" "${common[@]}" --benchmark_min_time=$min_time \
  --benchmark_enable_random_interleaving=true \
  --benchmark_out="$out/alloc.json" --benchmark_out_format=json > /dev/null
load alloc_end

log "growth on the host (growth_benchmark: long-term pin, mlock, io_uring)"
# 2 MiB pages for the whole total plus slack; one 1 GiB page (may be refused: reported).
echo $(( growth_mib / 2 + 64 )) > $hp2 || true
[ -z "$saved_hp1" ] || echo $(( saved_hp1 + 1 )) > $hp1 2>/dev/null || true
echo "hugepages_2M=$(cat $hp2) hugepages_1G=$(cat $hp1 2>/dev/null || echo n/a)" > "$out/hugepages.txt"
load growth_start
PINPOOL_BENCH_GROWTH_MIB=$growth_mib "$bin/growth_benchmark" \
  --benchmark_repetitions=$(( reps > 3 ? 3 : reps )) --benchmark_report_aggregates_only=true \
  --benchmark_format=json --benchmark_min_time=$min_time \
  --benchmark_out="$out/growth_host.json" --benchmark_out_format=json > /dev/null
load growth_end
restore_hugepages
echo "growth_mib=$growth_mib" >> "$out/hugepages.txt"

log "growth at scale on the host (growth_latency_benchmark, startup_benchmark)"
# Allocation latency while the pool grows, with a low watermark and without, and at steady rates;
# start-up GB/s of a 1 GiB pool (2 MiB pages for all of it, plus slack), sequential vs parallel.
load scale_start
PINPOOL_BENCH_GROWTH_CHUNKS=$([ "$quick" = quick ] && echo 4 || echo 16) \
  PINPOOL_BENCH_STEADY_MIB=$steady_mib "$bin/growth_latency_benchmark" --benchmark_format=json \
  --benchmark_out="$out/growth_latency_host.json" --benchmark_out_format=json > /dev/null
echo $(( 1024 / 2 + 64 )) > $hp2 || true
PINPOOL_BENCH_STARTUP_MIB=$([ "$quick" = quick ] && echo 256 || echo 1024) \
  "$bin/startup_benchmark" --benchmark_repetitions=$(( reps > 3 ? 3 : reps )) \
  --benchmark_report_aggregates_only=true --benchmark_format=json --benchmark_min_time=$min_time \
  --benchmark_out="$out/startup_host.json" --benchmark_out_format=json > /dev/null
restore_hugepages
load scale_end

log "memory overhead (overhead_benchmark)"
load overhead_start
PINPOOL_BENCH_LIVE_MIB=$live_mib "$bin/overhead_benchmark" --benchmark_format=json \
  --benchmark_out="$out/overhead.json" --benchmark_out_format=json > /dev/null
load overhead_end

# Instructions per pair: callgrind counts them, whatever the load (bench/instruction-counts.sh
# exits 77 without valgrind).
if ! has_target instructions_benchmark; then
  skip counts "this tree has no instructions_benchmark"
else
  log "instruction counts (bench/instruction-counts.sh --pairs $pairs, callgrind)"
  load counts_start
  status=0
  "$source_dir/bench/instruction-counts.sh" --pairs $pairs "$bin/instructions_benchmark" \
    > "$out/instruction_counts.md" 2> "$out/instruction_counts.log" || status=$?
  load counts_end
  if [ $status = 77 ]; then
    rm -f "$out/instruction_counts.md"
    skip counts "valgrind is not installed (scripts/setup-deps.sh installs it)"
  elif [ $status != 0 ]; then
    cat "$out/instruction_counts.log" >&2; exit 1
  fi
fi

# io_uring: one pool on 1-16 rings, cloned or registered per ring; zero-copy against copying sends.
if ! has_target io_uring_rings_benchmark; then
  skip io_uring_rings "this tree has no io_uring_rings_benchmark"
else
  log "io_uring rings (io_uring_rings_benchmark, a pool of $rings_mib MiB)"
  load io_uring_rings_start
  PINPOOL_BENCH_RINGS_MIB=$rings_mib \
    PINPOOL_BENCH_RINGS_ITERATIONS=$([ "$quick" = quick ] && echo 1 || echo 3) \
    "$bin/io_uring_rings_benchmark" --benchmark_repetitions=$(( reps > 3 ? 3 : reps )) \
    --benchmark_report_aggregates_only=true --benchmark_format=json \
    --benchmark_out="$out/io_uring_rings.json" --benchmark_out_format=json > /dev/null
  load io_uring_rings_end
fi
if ! has_target io_uring_zero_copy_benchmark; then
  skip io_uring_zero_copy "this tree has no io_uring_zero_copy_benchmark"
else
  log "io_uring sends (io_uring_zero_copy_benchmark: zero-copy vs copying, loopback TCP)"
  load io_uring_zero_copy_start
  "$bin/io_uring_zero_copy_benchmark" "${common[@]}" \
    --benchmark_min_time=$([ "$quick" = quick ] && echo 0.01 || echo 0.5) \
    --benchmark_out="$out/io_uring_zero_copy.json" --benchmark_out_format=json > /dev/null
  load io_uring_zero_copy_end
fi

# Python: the package as built (build/python), by the interpreter it was built for.
if ! has_target pinpool_python; then
  skip python "no Python package in this build (none in this tree, or PINPOOL_BUILD_PYTHON off: pybind11-dev, python3-dev)"
else
  py=$(sed -n 's/^PINPOOL_PYTHON:FILEPATH=//p' "$build_dir/CMakeCache.txt")
  py=${py:-/usr/bin/python3}
  smoke=$([ "$quick" = quick ] && echo --smoke || true)
  log "Python (alloc_benchmark.py, dataloader_benchmark.py with $py)"
  load python_start
  PYTHONPATH=$build_dir/python PYTHONDONTWRITEBYTECODE=1 "$py" \
    "$source_dir/python/bench/alloc_benchmark.py" $smoke --json "$out/python_alloc.json" \
    > "$out/python_alloc.txt"
  load python_alloc_end
  PYTHONPATH=$build_dir/python PYTHONDONTWRITEBYTECODE=1 "$py" \
    "$source_dir/python/bench/dataloader_benchmark.py" $smoke > "$out/python_dataloader.txt"
  load python_end
fi

# mimalloc-bench's programs through the preload shim, when given.
if [ -z "$third_party" ]; then
  skip third_party "not asked for: --third-party DIR runs the programs bench/third-party.sh build made"
elif ! has_target pinpool_preload; then
  skip third_party "no preload shim in this build"
else
  log "third-party programs (bench/third-party.sh --runs $third_runs $third_party)"
  load third_party_start
  # A failed run shows as FAIL in its cell (its output kept, named in the log): the page shows it.
  "$source_dir/bench/third-party.sh" --runs $third_runs --shim "$bin/libpinpool_preload.so" \
    --logs "$out/third_party_logs" "$third_party" > "$out/third_party.md" ||
    log "third-party: some runs failed (their output is in $out/third_party_logs)"
  load third_party_end
fi

# --- soft-RoCE guest ----------------------------------------------------------------------
if [ $guest = 1 ]; then
  load guest_start
  log "RDMA-ready buffers, data path, verbs growth in the soft-RoCE guest (minutes under TCG)"
  "$repo/scripts/softroce/run-in-guest.sh" --timeout 2400 -- \
    "$source_dir/bench/guest-benchmarks.sh" "$bin" "$out/guest" $quick
  load guest_end
else
  skip guest "--no-guest"
fi

# --- the page ----------------------------------------------------------------------------------
log "writing docs/benchmarks.md and docs/benchmarks/*.png"
write_page "$out"
log "done: docs/benchmarks.md (raw results in $out)"
