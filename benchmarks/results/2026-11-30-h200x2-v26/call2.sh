#!/usr/bin/env bash
# Session 26, call 2 (H200 pair). Tree = d070651 + both two-shot kernels compiled for two ranks +
# the 32-cycle poll pause in the Lamport two-shot (lamportPollPause, shared with the one-shot):
# call 1's L2FP, as it would land. Every GPU ctest entry and the four compute-sanitizer tools on
# it, three full gbench runs (the README's table), then sweeps for Auto's crossovers: one-shot
# against two-shot at 120-156 rows (rows of 8, 16, 32 and 64 KB) and narrow rows (bf16 hidden
# 256-2048) at 256 KiB-1.5 MiB.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
CTEST_ARGS="-L gpu" timeout 250 env OUT=$R bash tools/device_check.sh tests > $R/tests.txt 2>&1; ts "ctest"
OUT=$R timeout 170 bash tools/device_check.sh sanitize > $R/sanitize.txt 2>&1; ts "sanitize"
B=build-h200/benchmarks
for i in 1 2 3; do
  [ $(( $(date +%s) - T0 )) -gt 470 ] && break
  timeout 25 $B/bench_arfusion --benchmark_out=$R/gb-main-$i.json --benchmark_out_format=json > $R/gb-main-$i.txt 2>&1
done; ts gbench
for dh in bf16:4096:8192 bf16:8192:16384 bf16:16384:32768 fp32:8192:32768 fp32:16384:65536; do
  IFS=: read d h rb <<< "$dh"
  [ $(( $(date +%s) - T0 )) -gt 540 ] && break
  timeout 20 $B/arfusion-bench --min-bytes $((120 * rb)) --max-bytes $((156 * rb)) --per-octave 48 --dtypes $d --hidden $h --out $R/xo-$d-$h > $R/xo-$d-$h.txt 2>&1
done; ts "crossover sweeps"
[ $(( $(date +%s) - T0 )) -lt 550 ] && timeout 30 $B/arfusion-bench --min-bytes 262144 --max-bytes 1572864 --per-octave 6 --dtypes bf16 --hidden 256,512,1024,2048 --out $R/narrow > $R/narrow.txt 2>&1
ts "narrow sweep"
rm -f $R/*/*.png
tar czf $OUT/r.tgz -C $OUT r
tail -6 $R/tests.txt; cat $R/sanitize.txt; cat $R/times.txt
