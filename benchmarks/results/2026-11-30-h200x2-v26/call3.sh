#!/usr/bin/env bash
# Session 26, call 3 (H200 pair). Tree = a421176 + Auto's new crossovers for the pair (two-shot
# from 133 tokens and above 512 KiB; host code only). Sweeps of narrow rows (bf16 hidden 64-2048,
# 256 KiB-64 MiB: where do the fused paths lose to the NCCL path?), Auto at 120-156 rows of 8 and
# 16 KB, and two full gbench runs.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
B=build-h200/benchmarks
timeout 150 $B/arfusion-bench --min-bytes 262144 --max-bytes 67108864 --per-octave 2 --dtypes bf16 --hidden 64,128,256,512,1024,2048 --out $R/narrow > $R/narrow.txt 2>&1; ts "narrow sweep"
for dh in bf16:4096:8192 bf16:8192:16384; do
  IFS=: read d h rb <<< "$dh"
  timeout 20 $B/arfusion-bench --min-bytes $((120 * rb)) --max-bytes $((156 * rb)) --per-octave 48 --dtypes $d --hidden $h --out $R/xo-$d-$h > $R/xo-$d-$h.txt 2>&1
done; ts "crossover sweeps"
for i in 1 2; do
  [ $(( $(date +%s) - T0 )) -gt 400 ] && break
  timeout 25 $B/bench_arfusion --benchmark_out=$R/gb-main-$i.json --benchmark_out_format=json > $R/gb-main-$i.txt 2>&1
done; ts gbench
rm -f $R/*/*.png
tar czf $OUT/r.tgz -C $OUT r
cat $R/times.txt
