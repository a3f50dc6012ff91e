#!/usr/bin/env bash
# Session 27, call 4 (one H200: the pair was not lent). Tree = ff3166f: call 3s's tree with SplitFault's barrier taken by every rank, failed or not. Fixes for
# one GPU: the cluster fault path skips where the plan has no clusters (one GPU), and SplitFault
# agrees that both ranks' buffers exist before either launches (as StaleFlags). Every GPU ctest entry.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
CTEST_ARGS="-L gpu" timeout 300 env OUT=$R bash tools/device_check.sh tests > $R/tests.txt 2>&1; ts "ctest"
grep -E 'SKIPPED \] (Paths/Faults|SyncModes)|OK \] SyncModes|FAILED' $R/ctest.log | head -20
tar czf $OUT/r.tgz -C $OUT r
tail -8 $R/tests.txt; cat $R/times.txt
