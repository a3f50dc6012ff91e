#!/usr/bin/env bash
# Session 25, call 1 (H200 pair): microbench/push.cu only (static against dynamic splits of a
# peer push over SMs; its header says what it measures).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v25
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpus.txt 2>&1
nvcc -std=c++17 -O3 -arch=sm_90a $E/microbench/push.cu -o /tmp/push; ts "build rc=$?"
timeout 120 /tmp/push > $R/push.txt 2>&1; ts "push rc=$?"
timeout 120 /tmp/push > $R/push2.txt 2>&1; ts "push2 rc=$?"
tar czf $OUT/r.tgz -C $OUT r
cat $R/push.txt $R/push2.txt $R/times.txt
