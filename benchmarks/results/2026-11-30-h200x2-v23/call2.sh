#!/usr/bin/env bash
# Session 23, call 2 (H200 pair, warm after call 1, same tree): the four compute-sanitizer tools on
# this tree (the stop word changed every wait's slow path), then the full gbench run (Auto and the
# NCCL path in the same run) and the default sweep.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
OUT=$R timeout 330 bash tools/device_check.sh sanitize > $R/sanitize.txt 2>&1; ts "sanitize"
OUT=$R timeout 150 bash tools/device_check.sh gbench > /dev/null 2>&1; ts "gbench"
OUT=$R timeout 60 bash tools/device_check.sh sweep > /dev/null 2>&1; ts "sweep"
tar czf $OUT/r.tgz -C $OUT r
cat $R/sanitize.txt; cat $R/times.txt
