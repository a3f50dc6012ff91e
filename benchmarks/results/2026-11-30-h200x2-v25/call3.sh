#!/usr/bin/env bash
# Session 25, call 3 (H200 pair): microbench/exch2.cu only (the model with the real kernel's features one by one), then
# bench_arfusion at the same shapes (main).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v25
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpus.txt 2>&1
nvcc -std=c++17 -O3 -arch=sm_90a $E/microbench/exch2.cu -o /tmp/exch2; ts "build rc=$?"
for i in 1 2; do timeout 100 /tmp/exch2 > $R/exch2-$i.txt 2>&1; ts "exch2-$i rc=$?"; done
# The real kernels at the same shapes, same call (main as committed).
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
for i in 1 2; do build-h200/benchmarks/bench_arfusion --benchmark_filter='^run/(auto_fused|oneshot_allreduce|peer_store)/(1|32|128)/(4096|8192)/1/' > $R/gb-$i.txt 2>&1; done; ts gbench
tar czf $OUT/r.tgz -C $OUT r
cat $R/exch2-*.txt; grep -h manual_time $R/gb-*.txt | awk '{print $1, $2}'; cat $R/times.txt
