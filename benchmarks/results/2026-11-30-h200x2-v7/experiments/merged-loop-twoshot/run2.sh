#!/usr/bin/env bash
set -uo pipefail
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
bash exp/build_trace.sh build-trace > $R/build.txt 2>&1; tail -2 $R/build.txt
for cfg in "8192 8192 1 1" "8192 8192 1 4" "8192 8192 0 1" "8192 8192 0 4" "2048 8192 1 1" "2048 8192 1 2" "512 8192 1 1" "512 8192 1 2"; do
  set -- $cfg
  echo "=== tokens $1 hidden $2 norm $3 steps $4"
  ARFUSION_EXP_TWOSHOT_STEPS=$4 timeout 60 build-trace/trace $1 $2 $3 2>&1
done > $R/trace.txt
cat $R/trace.txt | grep -v "^  mark" | cut -c1-1500
tar czf $OUT/r.tgz -C $OUT r
