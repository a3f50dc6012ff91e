#!/usr/bin/env bash
# Session 24, call 3 (H200 pair), bench only. Main = 83c9763 (the one-shot's kVpt-1 kernels poll
# with a 32-cycle pause). Two variants of the same idea, each from main:
#   S0 = the one-shot's kVpt-1 kernels poll with no pause at all (oneshot-pause0-vpt1.patch);
#   T1 = the Lamport two-shot's kVpt-1 kernels poll with the 32-cycle pause too
#        (twoshot-pause32-vpt1.patch; 256-512 x 4096 and the forced two-shot at decode sizes).
# gbench A/B S0 / T1 / main (3 rounds), then bf16 sweeps, hidden 2048 and 4096, up to 8 MiB
# (main, S0, T1, twice).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v24
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
export VARIANTS="S0=$E/oneshot-pause0-vpt1.patch T1=$E/twoshot-pause32-vpt1.patch"
OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
AB_RUNS=3 AB_FILTER='(auto_fused|oneshot_fused|twoshot_fused|oneshot_allreduce|twoshot_allreduce|nccl_path_fused)/' OUT=$R timeout 150 bash tools/device_check.sh ab > /dev/null 2>&1; ts ab
for i in 1 2; do for l in main S0 T1; do
  bin=/tmp/arf-$l/build/benchmarks/arfusion-bench; [ $l = main ] && bin=build-h200/benchmarks/arfusion-bench
  timeout 60 $bin --max-bytes 8388608 --dtypes bf16 --hidden 2048,4096 --out $R/sweep-$l-$i > $R/sweep-$l-$i.txt 2>&1
done; done; ts sweeps
tar czf $OUT/r.tgz -C $OUT r
grep -E '^(auto_fused|oneshot_fused|twoshot_fused|oneshot_allreduce)/' $R/ab.txt; cat $R/times.txt
