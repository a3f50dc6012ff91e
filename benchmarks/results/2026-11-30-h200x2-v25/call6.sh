#!/usr/bin/env bash
# Session 25, call 6 (H200 pair): microbench/exch4.cu only (one block per SM: does the next launch's placement cost the
# real kernel its time? its header says more).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v25
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpus.txt 2>&1
nvcc -std=c++17 -O3 -arch=sm_90a --expt-relaxed-constexpr -Isrc -Iinclude -Isrc/kernels $E/microbench/exch4.cu -o /tmp/exch4 2> $R/build.log; ts "build rc=$?"
for i in 1 2; do timeout 100 /tmp/exch4 > $R/exch4-$i.txt 2>&1; ts "exch4-$i rc=$?"; done
tar czf $OUT/r.tgz -C $OUT r
cat $R/exch4-*.txt $R/times.txt
