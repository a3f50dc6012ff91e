#!/usr/bin/env bash
# Session 24, call 4 (H200 pair). Main = aced810 plus twoshot-split-once.patch (twoShotKernel
# tests "the block splits" once, in one variable, instead of twice; its PTX moves one compare in
# the 18 split kernels). OLD = main without it (the patch reversed) = aced810.
# Every GPU ctest entry and the four compute-sanitizer tools on main, then a gbench A/B OLD / main
# (3 rounds) of the two-shot families, Auto and the NCCL path.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v24
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
export VARIANTS="OLD=$E/twoshot-split-once.patch:R"
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
VARIANT_TARGETS=bench_arfusion OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
CTEST_ARGS="-L gpu" timeout 280 env OUT=$R bash tools/device_check.sh tests > $R/tests.txt 2>&1; ts "ctest"
OUT=$R timeout 200 bash tools/device_check.sh sanitize > $R/sanitize.txt 2>&1; ts "sanitize"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
AB_RUNS=3 AB_FILTER='(auto_fused|twoshot_fused|twoshot_allreduce|nccl_path_fused|peer_store)/' OUT=$R timeout 90 bash tools/device_check.sh ab > /dev/null 2>&1; ts ab
tar czf $OUT/r.tgz -C $OUT r
tail -6 $R/tests.txt; cat $R/sanitize.txt
grep -E '^(auto_fused|twoshot_fused|twoshot_allreduce)/(128|512|2048|8192)/' $R/ab.txt; cat $R/times.txt
