#!/usr/bin/env bash
# The device half of scripts/run-benchmarks.sh: runs INSIDE the soft-RoCE guest (rxe0), started
# by scripts/softroce/run-in-guest.sh, and writes its results into OUT_DIR (on the host's
# filesystem, which the guest shares):
#
#   bench/guest-benchmarks.sh BENCH_DIR OUT_DIR [quick]
#
#   rdma_ready.json          rdma_ready_benchmark (pool, verbs, UCX, libfabric with its MR cache)
#   rdma_ready_nocache.json  the libfabric benchmarks again with FI_MR_CACHE_MAX_COUNT=0
#   wire-ROUND.json          wire_benchmark (RDMA WRITE from pool blocks / registered buffers)
#   ib_write_bw-SIZE-ROUND.txt  perftest's ib_write_bw on the same device, sizes and depths,
#                            alternating with wire_benchmark round by round
#   growth_verbs.json        growth_benchmark with the verbs domain
#   growth_latency_verbs.json  growth_latency_benchmark (allocation latency while the pool grows,
#                            with a low watermark and without) with the verbs domain
#   remote_access.json       remote_access_benchmark (grants vs per-buffer registration and
#                            chunk-wide keys)
#   providers.json             providers_benchmark (a put through UCX and libfabric from pool
#                            blocks vs their own ways), when built (libucx-dev, libfabric-dev)
#   providers_nocache.json     its libfabric part again with FI_MR_CACHE_MAX_COUNT=0
#   guest.txt                the guest's kernel, CPUs, memory and huge pages obtained
# Nothing here needs cleaning up: the guest is thrown away when this exits.
set -euo pipefail

bench=$1 out=$2 quick=${3:-}
mkdir -p "$out"

if [ "$quick" = quick ]; then
  reps=1 min_time=0.05 wire_time=0.3 bw_mib=32 growth_mib=64 rounds=1
else
  reps=3 min_time=0.3 wire_time=3 bw_mib=256 growth_mib=256 rounds=3
fi

{
  echo "kernel=$(uname -r)"
  echo "cpus=$(nproc)"
  echo "memory_kib=$(awk '/MemTotal/ {print $2}' /proc/meminfo)"
  echo "cpu_model=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
} > "$out/guest.txt"

common=(--benchmark_repetitions=$reps --benchmark_report_aggregates_only=true
        --benchmark_format=json --benchmark_enable_random_interleaving=true)

echo "guest: rdma_ready_benchmark" >&2
"$bench/rdma_ready_benchmark" "${common[@]}" --benchmark_min_time=$min_time \
  --benchmark_out="$out/rdma_ready.json" --benchmark_out_format=json > /dev/null
FI_MR_CACHE_MAX_COUNT=0 "$bench/rdma_ready_benchmark" "${common[@]}" \
  --benchmark_min_time=$min_time --benchmark_filter='^fabric' \
  --benchmark_out="$out/rdma_ready_nocache.json" --benchmark_out_format=json > /dev/null

# Data path, in alternating rounds: wire_benchmark, then ib_write_bw at each size, three times,
# so that both see the same spread of the emulated machine's speed (report.py takes medians).
# perftest: server and client in this guest, loopback through rxe0 like the benchmark's two QPs;
# same message size, tx depth and completion moderation as wire_benchmark, and a fixed number of
# messages (bw_mib MiB per size) rather than -D, whose duration mode reported a suspiciously
# round 1024 iterations and no peak in a trial run.
gid_index=1  # the IPv4-mapped RoCE v2 GID the guest session waits for (docs/softroce.md)
for round in $(seq 1 $rounds); do
  echo "guest: wire_benchmark, round $round" >&2
  "$bench/wire_benchmark" --benchmark_format=json --benchmark_enable_random_interleaving=true \
    --benchmark_min_time=$wire_time \
    --benchmark_out="$out/wire-$round.json" --benchmark_out_format=json > /dev/null
  for size in 4096 65536 1048576; do
    depth=$(( 8388608 / size )); [ $depth -gt 128 ] && depth=128; [ $depth -lt 8 ] && depth=8
    iters=$(( bw_mib * 1048576 / size ))
    args=(-d rxe0 -x $gid_index -s $size -t $depth -Q $(( depth / 2 )) -n $iters -F)
    result=$out/ib_write_bw-$size-$round.txt
    echo "guest: ib_write_bw ${args[*]}, round $round" >&2
    # The server may take seconds to listen on a loaded, emulated machine: the client retries
    # its connection; both are bounded in time so that a lost peer cannot hang the guest.
    timeout 600 ib_write_bw "${args[@]}" > "$out/ib_write_bw-server-$size-$round.txt" 2>&1 &
    server=$!
    ok=0
    for attempt in $(seq 1 30); do
      sleep 1
      if { echo "command: ib_write_bw ${args[*]} 10.77.0.1"; timeout 600 ib_write_bw "${args[@]}" 10.77.0.1; } \
          > "$result" 2>&1; then
        ok=1
        break
      fi
      grep -q "Couldn't connect" "$result" || break
    done
    if [ $ok = 0 ]; then
      echo "guest: ib_write_bw $size failed (see $result)" >&2
      kill $server 2>/dev/null || true
    fi
    wait $server || true
  done
done

echo "guest: remote_access_benchmark" >&2
"$bench/remote_access_benchmark" "${common[@]}" --benchmark_min_time=$min_time \
  --benchmark_out="$out/remote_access.json" --benchmark_out_format=json > /dev/null

echo "guest: growth_benchmark (verbs)" >&2
# Huge pages inside the guest (its own kernel; thrown away with it).
echo $(( growth_mib / 2 + 16 )) > /proc/sys/vm/nr_hugepages || true
echo "hugepages_2M=$(cat /proc/sys/vm/nr_hugepages)" >> "$out/guest.txt"
PINPOOL_BENCH_GROWTH_MIB=$growth_mib "$bench/growth_benchmark" "${common[@]}" \
  --benchmark_min_time=$min_time \
  --benchmark_out="$out/growth_verbs.json" --benchmark_out_format=json > /dev/null
echo "growth_mib=$growth_mib" >> "$out/guest.txt"

echo "guest: growth_latency_benchmark (verbs)" >&2
PINPOOL_BENCH_GROWTH_CHUNKS=$([ "$quick" = quick ] && echo 3 || echo 8) \
  "$bench/growth_latency_benchmark" --benchmark_format=json \
  --benchmark_out="$out/growth_latency_verbs.json" --benchmark_out_format=json > /dev/null

# UCX and libfabric domains (docs/providers.md): puts from pool blocks vs the providers' own ways. rxe needs
# UCX_IB_GID_INDEX=0 and, for verbs;ofi_rxm, FI_UNIVERSE_SIZE=64; libfabric reads its cache setting
# once per process, hence a second run for the uncached registrations.
if [ -x "$bench/providers_benchmark" ]; then
  echo "guest: providers_benchmark" >&2
  UCX_IB_GID_INDEX=0 FI_UNIVERSE_SIZE=64 "$bench/providers_benchmark" "${common[@]}" \
    --benchmark_min_time=$min_time \
    --benchmark_out="$out/providers.json" --benchmark_out_format=json > /dev/null
  UCX_IB_GID_INDEX=0 FI_UNIVERSE_SIZE=64 FI_MR_CACHE_MAX_COUNT=0 "$bench/providers_benchmark" \
    "${common[@]}" --benchmark_min_time=$min_time \
    --benchmark_out="$out/providers_nocache.json" --benchmark_out_format=json > /dev/null
fi
echo "guest: done" >&2
