#!/usr/bin/env bash
# Session 25, call 5 (H200 pair): microbench/exch3.cu only (the model with the library's Lamport
# layout and its RowEpilogue; its header says what each switch does).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v25
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpus.txt 2>&1
nvcc -std=c++17 -O3 -arch=sm_90a --expt-relaxed-constexpr -Isrc -Iinclude -Isrc/kernels $E/microbench/exch3.cu -o /tmp/exch3 2> $R/build.log; ts "build rc=$?"
for i in 1 2; do timeout 100 /tmp/exch3 > $R/exch3-$i.txt 2>&1; ts "exch3-$i rc=$?"; done
tar czf $OUT/r.tgz -C $OUT r
cat $R/exch3-*.txt $R/times.txt
