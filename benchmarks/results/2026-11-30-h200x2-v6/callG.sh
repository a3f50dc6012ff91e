#!/usr/bin/env bash
# Session 6, device call G: sweep and decode on the landed code (a2da3c0).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
OUT=$R tools/device_check.sh build
build-h200/benchmarks/arfusion-bench --out $R/sweep > $R/sweep.txt 2>&1
grep -E "auto slower|auto >" $R/sweep.txt
build-h200/benchmarks/arfusion-decode-bench > $R/decode.txt 2>&1
tail -7 $R/decode.txt
tar czf $OUT/r.tgz -C $OUT r
