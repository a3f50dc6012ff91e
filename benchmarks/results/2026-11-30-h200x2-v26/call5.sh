#!/usr/bin/env bash
# Session 26, call 5 (H200 pair), an experiment for the next session (nothing lands from it).
# Tree = main (docs commit after 06d53d2). Variant LW (bench only): a Lamport area of up to 96 MiB
# per peer instead of 32 (lamport-area-96.patch), so that 2048 x 8192 (R = 8, 256 KiB per region)
# runs on the two-rank Lamport two-shot instead of the flag kernel. gbench A/B, 3 rounds.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v26
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
export VARIANTS="LW=$E/lamport-area-96.patch"
VARIANT_TARGETS=bench_arfusion OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
export AB_FILTER='^run/(auto_fused|twoshot_fused|twoshot_allreduce|oneshot_fused|nccl_path_fused)/(1|128|512|2048|8192)/(4096|8192)/1/'
AB_RUNS=3 OUT=$R timeout 100 bash tools/device_check.sh ab > /dev/null 2>&1; ts ab
tar czf $OUT/r.tgz -C $OUT r
grep -E '^(auto_fused|twoshot_fused|twoshot_allreduce)/' $R/ab.txt; cat $R/times.txt
