#!/usr/bin/env bash
# Session 6, device call D (final): the candidate (call signatures with the header polled together
# with the first rows) = working tree; A/B against "callc" (call signatures, header loaded after the
# rows: commit f61bede) and "oldbar" (the push barrier only: 5149f67). GPU tests, the Faults tests
# with their output, Google Benchmark x2 interleaved, sweep, decode, four sanitizers.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
left() { echo $(( 575 - ($(date +%s) - T0) )); }
for v in callc oldbar; do
  mkdir -p /tmp/$v && cp -r CMakeLists.txt CMakePresets.json cmake include benchmarks tests tools /tmp/$v/ && cp -r exp/$v-src /tmp/$v/src
  ( cmake -S /tmp/$v -B /tmp/$v/build-h200 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release && cmake --build /tmp/$v/build-h200 -j 8 --target bench_arfusion ) > $R/build-$v.log 2>&1 &
done
# the old trees need the include/ of their own commit: callc == HEAD include; oldbar predates kMismatch (include unused by kernels)
OUT=$R tools/device_check.sh build; ts build-new
wait; ts build-ab; tail -1 $R/build-callc.log $R/build-oldbar.log
timeout 300 ctest --test-dir build-h200 --output-on-failure --timeout 280 -L gpu > $R/ctest.log 2>&1; ts ctest rc=$?
grep -E "tests passed|Test +#|^soak|process soak|FAILED|Failure|Which is|expected" $R/ctest.log | head -30
build-h200/tests/test_gpu --gtest_filter='Faults.*' > $R/faults.log 2>&1; ts faults rc=$?
grep -E "^\[ +(OK|FAILED|SKIPPED) " $R/faults.log
for rep in 1 2; do for v in oldbar callc new; do
  b=build-h200; [ $v != new ] && b=/tmp/$v/build-h200
  $b/benchmarks/bench_arfusion --benchmark_out=$R/gb-$v-r$rep.json --benchmark_out_format=json > $R/gb-$v-r$rep.txt 2>&1
done; done; ts gbench
python3 exp/gbtable.py oldbar=$R/gb-oldbar-r1.json oldbar=$R/gb-oldbar-r2.json callc=$R/gb-callc-r1.json callc=$R/gb-callc-r2.json new=$R/gb-new-r1.json new=$R/gb-new-r2.json > $R/ab.txt
grep -E "^(1x4096x1|16x8192x1|128x8192x1|512x8192x1|2048x8192x1|8192x8192x1) " $R/ab.txt | cut -c1-420
build-h200/benchmarks/arfusion-bench --out $R/sweep > $R/sweep.txt 2>&1; ts sweep
grep -E "auto slower|auto >" $R/sweep.txt
build-h200/benchmarks/arfusion-decode-bench > $R/decode.txt 2>&1; ts decode
tail -7 $R/decode.txt
for tool in racecheck memcheck synccheck initcheck; do
  l=$(left); [ $l -gt 45 ] || break
  w=$(( l - 30 )); [ $w -gt 100 ] && w=100
  SAN_TOOLS=$tool SAN_WAIT_S=$w SAN_LIMIT_S=$(( w + 20 )) SAN_RACE_LIMIT_S=$(( w + 20 )) OUT=$R tools/device_check.sh sanitize 2>&1 | head -3; ts $tool
done
tar czf $OUT/r.tgz -C $OUT r
