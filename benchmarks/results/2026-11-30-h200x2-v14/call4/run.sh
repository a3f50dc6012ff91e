#!/usr/bin/env bash
# Session 14 call 4: the landed tree (split two-shot, aligned named barriers, ARFUSION_TWO_SHOT_SPLIT):
# build, GPU tests, benchmark (2 runs + 1 with the split off), racecheck (split off) and synccheck.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
OUT=$R tools/device_check.sh build tests > $R/check.txt 2>&1; ts "build+tests $(grep -E 'tests passed|FAIL' $R/check.txt | tr '\n' ' ')"
tar czf $OUT/r.tgz -C $OUT r
for i in 1 2; do build-h200/benchmarks/bench_arfusion --benchmark_out=$R/gb-$i.json --benchmark_out_format=json > $R/gb-$i.txt 2>&1; done
ARFUSION_TWO_SHOT_SPLIT=0 build-h200/benchmarks/bench_arfusion --benchmark_filter='(twoshot|auto)_(fused|allreduce)' --benchmark_out=$R/gb-nosplit.json --benchmark_out_format=json > $R/gb-nosplit.txt 2>&1; ts gbench
tar czf $OUT/r.tgz -C $OUT r
SAN_TOOLS="racecheck synccheck" OUT=$R tools/device_check.sh sanitize > $R/sanitize.txt 2>&1; ts "sanitize $(cat $R/sanitize.txt | tr '\n' ' ')"
tar czf $OUT/r.tgz -C $OUT r
