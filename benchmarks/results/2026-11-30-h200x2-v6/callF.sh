#!/usr/bin/env bash
# Session 6, device call F: the IPC create/destroy leak test (ranks as processes).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
OUT=$R tools/device_check.sh build
timeout 150 build-h200/tests/test_gpu_procs --gtest_filter='Processes.CreateDestroy*' > $R/leak.log 2>&1; echo "leak rc=$?"
grep -a -E "^\[ +(OK|FAILED|SKIPPED) |create/destroy|Failure|Expected|Which is|cycle" $R/leak.log | head -20
tar czf $OUT/r.tgz -C $OUT r
