#!/usr/bin/env bash
# Session 23, call 4 (H200 pair): main at its last kernel change (the merged RowEpilogue core on
# top of the stop word): every GPU ctest entry, the four compute-sanitizer tools, the full gbench
# run (Auto and the NCCL path in the same run) and the default sweep.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
CTEST_ARGS="-L gpu" timeout 280 env OUT=$R bash tools/device_check.sh tests > $R/tests.txt 2>&1; ts "ctest"
OUT=$R timeout 200 bash tools/device_check.sh sanitize > $R/sanitize.txt 2>&1; ts "sanitize"
OUT=$R timeout 30 bash tools/device_check.sh gbench > /dev/null 2>&1; ts "gbench"
OUT=$R timeout 40 bash tools/device_check.sh sweep > /dev/null 2>&1; ts "sweep"
tar czf $OUT/r.tgz -C $OUT r
tail -7 $R/tests.txt; cat $R/sanitize.txt; cat $R/times.txt
