#!/usr/bin/env bash
# Session 28, call 2 (H200 pair). Tree = 168ecf6 + tree-both.patch: stage-residual.patch (the flag two-shot
# stages its last unit's peer residual rows in shared memory by TMA at the start; two ranks) + v27
# lamport-defer-epilogue.patch (2a sums and pushes every owned row's vectors, 2b then runs their
# epilogues while the sums cross). Bench-only variants: OLD = 168ecf6 (patch reversed); CS =
# the tree with every storePack an evict-first store (st.global.cs: outputs leave L2 room for the
# gathered sums; cs-stores-from-tree.patch). Every GPU ctest entry on the tree while they build; a
# gbench A/B of the two-shot's shapes (3 rounds; ab.txt columns OLD, CS, main = tree); sweeps of
# OLD and the tree over the Lamport two-shot's range.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-12-01-h200x2-v27; V=benchmarks/results/2026-12-01-h200x2-v28
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
export VARIANTS="OLD=$V/tree-both.patch:R CS=$E/cs-stores-from-tree.patch"
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
CTEST_ARGS="-L gpu" timeout 280 env OUT=$R bash tools/device_check.sh tests > $R/tests.txt 2>&1; ts "ctest"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
export AB_FILTER='^run/((auto_fused|twoshot_fused|twoshot_allreduce|nccl_path_fused)/(128|256|512|2048|8192)/(4096|8192)/1/|peer_store/(512|2048|8192)/)'
AB_RUNS=3 OUT=$R timeout 200 bash tools/device_check.sh ab > /dev/null 2>&1; ts ab
for l in OLD main; do
  [ $(( $(date +%s) - T0 )) -gt 540 ] && break
  bin=/tmp/arf-$l/build/benchmarks/arfusion-bench; [ $l = main ] && bin=build-h200/benchmarks/arfusion-bench
  timeout 30 $bin --min-bytes 524288 --max-bytes 12582912 --per-octave 4 --dtypes bf16,fp32 --hidden 4096,8192 --out $R/sweep-$l > $R/sweep-$l.txt 2>&1
done; ts sweeps
rm -f $R/sweep-*/*.png
tar czf $OUT/r.tgz -C $OUT r
tail -8 $R/tests.txt
grep -E '^(auto_fused|twoshot_fused|twoshot_allreduce|nccl_path_fused|peer_store)/' $R/ab.txt; cat $R/times.txt
