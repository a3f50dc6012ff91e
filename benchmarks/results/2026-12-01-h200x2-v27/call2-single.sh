#!/usr/bin/env bash
# Session 27, call 2s (one H200: the pair was not lent). Tree = 9835478 + lamport-defer-epilogue.patch.
# Correctness only: every GPU ctest entry (on one GPU the 2..8-rank groups run several ranks per GPU;
# the two-GPU tests skip).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
CTEST_ARGS="-L gpu" timeout 300 env OUT=$R bash tools/device_check.sh tests > $R/tests.txt 2>&1; ts "ctest"
grep -E '^\[  (SKIPPED|PASSED|FAILED) ' $R/ctest.log | sort | uniq -c | head; grep -cE '^\[       OK \]' $R/ctest.log
tar czf $OUT/r.tgz -C $OUT r
tail -8 $R/tests.txt; cat $R/times.txt
