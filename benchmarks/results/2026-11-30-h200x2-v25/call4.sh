#!/usr/bin/env bash
# Session 25, call 4 (H200 pair), bench only. Call 3 found the stripped model of the Lamport
# one-shot (microbench/exch2.cu) ~1.8 us faster than the real kernel at 128 x 8192 even with the
# real kernel's epoch, header, poll, parameter block and give-up word, and ~2 us faster as a plain
# allreduce on one block at 1 x 8192. The model is compiled for two ranks; the real kernels unroll
# every rank loop to kMaxRanks = 8 (the bf16 held kernel is 60 KB of SASS, the cluster ones
# 115-160 KB). Variants, each from main (build of the bench targets only):
#   M   = main as committed
#   R2  = kMaxRanks 2 (rank loops of two; the Lamport header bytes kept at 128 so rows stay on
#         their 128-byte lines): r2-max-ranks-2.patch
#   R2N = R2 + one block per row everywhere (no clusters): r2n-max-ranks-2-one-block.patch
# gbench A/B M / R2 / R2N, 3 rounds.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v25
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpus.txt 2>&1
export VARIANTS="M= R2=$E/r2-max-ranks-2.patch R2N=$E/r2n-max-ranks-2-one-block.patch"
OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
AB_RUNS=3 AB_FILTER='^run/((auto_fused|oneshot_allreduce)/(1|8|32|128)/(4096|8192)|auto_fused/(512|2048)/8192|twoshot_allreduce/2048/8192|nccl_path_fused/(1/4096|128/8192))/1/' \
  OUT=$R timeout 200 bash tools/device_check.sh ab > /dev/null 2>&1; ts ab
tar czf $OUT/r.tgz -C $OUT r
cat $R/ab.txt; cat $R/times.txt
