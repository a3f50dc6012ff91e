#!/usr/bin/env bash
# Session 25, call 2 (H200 pair): microbench/exch.cu only (a stripped Lamport one-shot with the
# push in row order against today's row-per-block push; its header says what it measures).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v25
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpus.txt 2>&1
nvcc -std=c++17 -O3 -arch=sm_90a $E/microbench/exch.cu -o /tmp/exch; ts "build rc=$?"
for i in 1 2 3; do timeout 100 /tmp/exch > $R/exch$i.txt 2>&1; ts "exch$i rc=$?"; done
tar czf $OUT/r.tgz -C $OUT r
cat $R/exch*.txt $R/times.txt
