#!/usr/bin/env bash
# Session 26, call 1 (H200 pair). Tree = d070651 + both two-shot kernels compiled for two ranks
# (twoshot-world2.patch: the Lamport two-shot as v25 next/, and the flag two-shot the same way).
# Variants (bench only): OLD = d070651 (patch reversed), L2 = the Lamport two-shot only (the flag
# part reversed), L2FP = tree + a 32-cycle poll pause in the Lamport two-shot (kVpt 1, and kVpt 2
# at two ranks). Every GPU ctest entry on the tree while the variants build; a gbench A/B over
# the two-shot shapes (3 rounds); sweeps 0.5-16 MiB (bf16, fp32; hidden 4096, 8192, 16384) of
# OLD, tree and L2FP for the Auto crossovers.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v26
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
export VARIANTS="OLD=$E/twoshot-world2.patch:R L2=$E/flag-world2.patch:R L2FP=$E/pause32-twoshot.patch"
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
CTEST_ARGS="-L gpu" timeout 260 env OUT=$R bash tools/device_check.sh tests > $R/tests.txt 2>&1; ts "ctest"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
export AB_FILTER='^run/(auto_fused|twoshot_fused|twoshot_allreduce|oneshot_fused|nccl_path_fused)/(128|256|512|2048|8192)/(4096|8192)/1/'
AB_RUNS=3 OUT=$R timeout 120 bash tools/device_check.sh ab > /dev/null 2>&1; ts ab
for l in OLD main L2FP; do
  [ $(( $(date +%s) - T0 )) -gt 530 ] && break
  bin=/tmp/arf-$l/build/benchmarks/arfusion-bench; [ $l = main ] && bin=build-h200/benchmarks/arfusion-bench
  timeout 40 $bin --min-bytes 524288 --max-bytes 16777216 --per-octave 4 --dtypes bf16,fp32 --hidden 4096,8192,16384 --out $R/sweep-$l > $R/sweep-$l.txt 2>&1
done; ts sweeps
rm -f $R/sweep-*/*.png
tar czf $OUT/r.tgz -C $OUT r
tail -6 $R/tests.txt
grep -E '^(auto_fused|twoshot_fused|twoshot_allreduce|oneshot_fused|nccl_path_fused)/' $R/ab.txt; cat $R/times.txt
