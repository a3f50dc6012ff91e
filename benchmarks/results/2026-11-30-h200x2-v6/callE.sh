#!/usr/bin/env bash
# Session 6, device call E: the landed code (f61bede): the Faults tests with their output (the
# mismatch test's cases are visible), nothing else.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
OUT=$R tools/device_check.sh build
build-h200/tests/test_gpu --gtest_filter='*Faults.RanksPairing*' > $R/faults.log 2>&1; echo "faults rc=$?"
grep -E "^\[ +(OK|FAILED|SKIPPED) |mismatch reported|Failure|expected" $R/faults.log
tar czf $OUT/r.tgz -C $OUT r
