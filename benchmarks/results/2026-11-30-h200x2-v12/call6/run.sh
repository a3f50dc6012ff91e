#!/usr/bin/env bash
# Session 12, call 6: the review's test changes (enterPath checks both calls of the mismatch test)
# and the 0.2.0 version: test_gpu in full (Faults on all four paths, soaks, scenarios).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
B=build-h200
{ cmake -S . -B $B -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release && cmake --build $B -j 16 --target test_gpu; } > $R/build.log 2>&1; ts "build rc=$?"
timeout 200 $B/tests/test_gpu > $R/test_gpu.log 2>&1; ts "test_gpu rc=$?"
grep -E "^\[  (PASSED|FAILED) |tests ran|soak|Failure" $R/test_gpu.log | head -20
grep -E "^\[       OK \] Paths/Faults" $R/test_gpu.log | wc -l
tar czf $OUT/r.tgz -C $OUT r
