#!/usr/bin/env bash
# Session 25, call 9 (H200 pair), bench only. Main = c01d2c5 (the one-shot's two-rank kernels).
# P32 = the 32-cycle poll pause in every one-shot kernel (pause32-all-world2.patch; session 24 found
# it slower with two vectors per thread, before the two-rank kernels). gbench A/B P32 / main of
# the one-shot shapes, 3 rounds.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v25
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpus.txt 2>&1
export VARIANTS="P32=$E/pause32-all-world2.patch M="
OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
AB_RUNS=3 AB_FILTER='^run/((auto_fused|oneshot_allreduce)/(1|4|8|16|32|64|128)/(4096|8192))/1/' \
  OUT=$R timeout 150 bash tools/device_check.sh ab > /dev/null 2>&1; ts ab
tar czf $OUT/r.tgz -C $OUT r
cat $R/ab.txt; cat $R/times.txt
