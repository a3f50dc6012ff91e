#!/usr/bin/env bash
# Session 21 call 4: main (no kernel change since 799eff8; bench_arfusion gains peer_store at
# 1 x 4096 and 128 x 8192): full build, every GPU ctest entry, one full gbench run, the default
# sweep; and, bench only, the Lamport poll's back-off capped at 128 / 32 cycles instead of 512
# (poll-backoff-b128.patch / -b32.patch) against main, 3 runs.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v21/call4
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
git log --oneline -1 > $R/tree.txt 2>&1; git status --short >> $R/tree.txt 2>&1
OUT=$R bash tools/device_check.sh build > $R/build-stage.txt 2>&1; ts "build: $(tail -1 $R/build-stage.txt)"
export VARIANTS="B128=$E/poll-backoff-b128.patch B32=$E/poll-backoff-b32.patch"
OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
CTEST_ARGS="-L gpu" OUT=$R bash tools/device_check.sh tests > $R/tests.txt 2>&1; ts "tests: $(grep -E 'tests passed' $R/tests.txt)"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
OUT=$R bash tools/device_check.sh gbench > /dev/null 2>&1; ts gbench
AB_RUNS=3 AB_FILTER='(auto_fused|oneshot_allreduce|nccl_path_fused)/(1/4096|4/4096|32/4096|1/8192|16/8192|64/8192|128/8192|256/8192|512/8192|2048/8192|8192/8192)/|peer_store' \
  OUT=$R bash tools/device_check.sh ab; ts ab
timeout 80 build-h200/benchmarks/arfusion-bench --out $R/sweep > $R/sweep.txt 2>&1; ts "sweep rc=$?"
tar czf $OUT/r.tgz -C $OUT r
cat $R/tests.txt | tail -15; cat $R/ab.txt; cat $R/times.txt; tail -3 $R/sweep.txt
