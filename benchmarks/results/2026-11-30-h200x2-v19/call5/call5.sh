#!/usr/bin/env bash
# Session 19 call 5: the fault tests after their refactor (one FaultCall object holds the bf16
# operands and makes the call, instead of four spelled-out calls): sm_90a build of test_gpu and
# every Faults and SplitFault case. No kernel changed.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
{ cmake -S . -B build-h200 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release && cmake --build build-h200 -j 32 --target test_gpu; } > $R/build.log 2>&1; ts "build rc=$?"
timeout 400 build-h200/tests/test_gpu --gtest_filter='*Faults*:*SplitFault*' > $R/faults.log 2>&1; ts "faults rc=$?"
grep -E '^\[  (PASSED|FAILED) |tests ran|FAILED  \]' $R/faults.log; grep -cE '^\[       OK \]' $R/faults.log
tar czf $OUT/r.tgz -C $OUT r
