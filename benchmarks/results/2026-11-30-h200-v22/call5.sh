#!/usr/bin/env bash
# Session 22, call 5 (H200 pair, the last ~290 device seconds): the workspace-alignment lead of
# session 21 on its own, bench only. M = main, ALN = main + region-align-128.patch (both areas'
# regions rounded down to 128 bytes). 2 gbench runs each of the shapes whose kernel the patch
# cannot change (512 rows and up at hidden 4096/8192, 256 rows), Auto, the two-shot and its plain
# allreduce. Not landed either way: its GPU tests and sanitizers need a call of their own.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
export VARIANTS="M= ALN=benchmarks/results/2026-11-30-h200x2-v21/next/region-align-128.patch"
VARIANT_TARGETS=bench_arfusion OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
AB_RUNS=2 AB_FILTER='(auto_fused|twoshot_fused|twoshot_allreduce|peer_store)/(256|512|2048|8192)/' OUT=$R timeout 90 bash tools/device_check.sh ab > /dev/null 2>&1; ts ab
tar czf $OUT/r.tgz -C $OUT r
grep -v "^$" $R/ab.txt | head -40; cat $R/times.txt
