#!/usr/bin/env bash
# Session 29, call 0s (one H200: the pair was not lent). Tree = tree.patch on 8b37c80 (two-role
# probe + Lamport prefetch of the whole unit + the row-signal knob). Correctness only: every GPU
# ctest entry with ARFUSION_TWO_SHOT_FINISHERS=16 ARFUSION_TWO_SHOT_ROW_SIGNAL=3 (several ranks per
# GPU; the two-GPU tests skip), then with the tree's defaults (the Lamport prefetch change).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R/on $R/off
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
ARFUSION_TWO_SHOT_FINISHERS=16 ARFUSION_TWO_SHOT_ROW_SIGNAL=3 CTEST_ARGS="-L gpu" timeout 200 env OUT=$R/on bash tools/device_check.sh tests > $R/tests-on.txt 2>&1; ts "ctest with finishers, k=3"
CTEST_ARGS="-L gpu" timeout 150 env OUT=$R/off bash tools/device_check.sh tests > $R/tests-off.txt 2>&1; ts "ctest defaults"
grep -E 'FAILED|Failure' $R/on/ctest.log | head; grep -cE '^\[       OK \]' $R/on/ctest.log
grep -E 'FAILED|Failure' $R/off/ctest.log | head -5
tar czf $OUT/r.tgz -C $OUT r
tail -4 $R/tests-on.txt; tail -4 $R/tests-off.txt; cat $R/times.txt
