#!/usr/bin/env bash
# Session 28, call 5 (H200 pair). Tree = 168ecf6 + csrc.patch as it lands (residual_out and the
# Lamport clears as evict-first stores). Every GPU ctest entry and the four compute-sanitizer
# tools on it, then full gbench runs (the closing note's table).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
CTEST_ARGS="-L gpu" timeout 250 env OUT=$R bash tools/device_check.sh tests > $R/tests.txt 2>&1; ts "ctest"
OUT=$R timeout 170 bash tools/device_check.sh sanitize > $R/sanitize.txt 2>&1; ts "sanitize"
B=build-h200/benchmarks
for i in 1 2 3; do
  [ $(( $(date +%s) - T0 )) -gt 500 ] && break
  timeout 25 $B/bench_arfusion --benchmark_out=$R/gb-main-$i.json --benchmark_out_format=json > $R/gb-main-$i.txt 2>&1
done; ts gbench
tar czf $OUT/r.tgz -C $OUT r
tail -6 $R/tests.txt; cat $R/sanitize.txt; cat $R/times.txt
