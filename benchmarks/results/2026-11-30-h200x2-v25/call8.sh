#!/usr/bin/env bash
# Session 25, call 8 (H200 pair). Main = the Lamport one-shot compiled for two ranks (the tree:
# world2-landed.patch on 6d9cd7b, i.e. call 7's W2 with the header comment), OLD = 6d9cd7b
# (the patch reversed). Every GPU ctest entry and the four compute-sanitizer tools on main; a
# gbench A/B OLD / main over every benchmark (3 rounds); sweeps up to 1 MiB in bf16, fp16 and
# fp32 (OLD, main, twice).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v25
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
export VARIANTS="OLD=$E/world2-landed.patch:R"
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
CTEST_ARGS="-L gpu" timeout 280 env OUT=$R bash tools/device_check.sh tests > $R/tests.txt 2>&1; ts "ctest"
OUT=$R timeout 200 bash tools/device_check.sh sanitize > $R/sanitize.txt 2>&1; ts "sanitize"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
AB_RUNS=3 OUT=$R timeout 90 bash tools/device_check.sh ab > /dev/null 2>&1; ts ab
for i in 1 2; do for l in OLD main; do
  [ $(( $(date +%s) - T0 )) -gt 540 ] && break 2
  bin=/tmp/arf-$l/build/benchmarks/arfusion-bench; [ $l = main ] && bin=build-h200/benchmarks/arfusion-bench
  timeout 40 $bin --max-bytes 1048576 --dtypes bf16,fp16,fp32 --hidden 2048,4096,8192 --out $R/sweep-$l-$i > $R/sweep-$l-$i.txt 2>&1
done; done; ts sweeps
tar czf $OUT/r.tgz -C $OUT r
tail -6 $R/tests.txt; cat $R/sanitize.txt
grep -E '^(auto_fused|oneshot_fused|oneshot_allreduce|nccl_path_fused|twoshot_fused|twoshot_allreduce|peer_store)/(1|4|8|16|32|64|128|512|2048|8192)/(4096|8192)/1 ' $R/ab.txt; cat $R/times.txt
