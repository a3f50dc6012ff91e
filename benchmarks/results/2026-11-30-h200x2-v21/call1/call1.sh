#!/usr/bin/env bash
# Session 21 call 1: (a) microbench/lap.cu: does a load right after a thread's NVLink stores wait
# for them, per PTX load form; (b) bench only: loadPack's 16-byte load in each form (patches
# load-*.patch; P = today's ld.global through asm volatile, the control), M = main.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v21
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpus.txt 2>&1
export VARIANTS="M= P=$E/call1/load-P.patch G=$E/call1/load-G.patch N=$E/call1/load-N.patch S=$E/call1/load-S.patch A=$E/call1/load-A.patch"
OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
nvcc -std=c++17 -O3 -arch=sm_90a $E/microbench/lap.cu -o /tmp/lap && /tmp/lap > $R/lap.txt 2>&1; ts "lap rc=$?"
/tmp/lap > $R/lap2.txt 2>&1; ts "lap2 rc=$?"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
AB_RUNS=3 AB_FILTER='^(auto_fused/(1/4096|1/8192|16/8192|128/8192|512/8192|2048/8192|8192/8192)/1|twoshot_allreduce/(2048|8192)/8192/1|nccl_path_fused/(128|512)/8192/1)$' \
  OUT=$R bash tools/device_check.sh ab; ts ab
tar czf $OUT/r.tgz -C $OUT r
cat $R/lap.txt; cat $R/ab.txt; cat $R/times.txt
