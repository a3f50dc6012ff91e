#!/usr/bin/env bash
# Session 23, call 5 (H200 pair): after a test-only refactor (withAbsentPeer), the Faults tests on
# every path, and the stale-flag and split-fault tests beside them.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
timeout 200 build-h200/tests/test_gpu --gtest_filter='Paths/Faults.*:SyncModes/SplitFault.*:FlagKernels/StaleFlags.*' > $R/faults.txt 2>&1; ts "faults rc=$?"
tar czf $OUT/r.tgz -C $OUT r
grep -E "^\[ +(FAILED|PASSED) +\]|tests ran|queued" $R/faults.txt | head -20; cat $R/times.txt
