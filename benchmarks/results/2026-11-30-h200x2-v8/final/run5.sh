#!/usr/bin/env bash
# Session 8, call 5 (final): candidate = working tree (HEAD cf0650b + the two-barrier block
# reduction, "e1"); A/B against HEAD ("head") and the session's start 009b3a4 ("base"), gbench x2
# interleaved; GPU tests, sweep, decode, sanitizers on the candidate as time allows.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
left() { echo $(( 560 - ($(date +%s) - T0) )); }
for v in head base; do
  ( rm -rf /tmp/$v && mkdir -p /tmp/$v && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools cmake /tmp/$v/ && cp -r exp/$v/src /tmp/$v/src && cd /tmp/$v && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null && cmake --build b -j 8 --target bench_arfusion > build.log 2>&1; echo "$v build rc=$?" ) > $R/build-$v.txt 2>&1 &
done
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; tail -1 $R/build.txt
wait; cat $R/build-head.txt $R/build-base.txt; ts builds
B=build-h200
for i in 1 2; do for v in base head e1; do
  b=/tmp/$v/b; [ $v = e1 ] && b=$B
  $b/benchmarks/bench_arfusion --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
done; done; ts gbench
python3 exp/gbtable.py base=$R/gb-base-1.json base=$R/gb-base-2.json head=$R/gb-head-1.json head=$R/gb-head-2.json e1=$R/gb-e1-1.json e1=$R/gb-e1-2.json > $R/ab.txt
grep -E "^(1x4096x1|16x8192x1|128x8192x1|512x8192x1|2048x8192x1|8192x8192x1) " $R/ab.txt | cut -c1-330
tar czf $OUT/r.tgz -C $OUT r
timeout 240 ctest --test-dir $B --output-on-failure --timeout 230 -L gpu -V > $R/ctest.log 2>&1; ts ctest rc=$?
grep -E "tests passed|^soak|process soak|FAILED|Failure" $R/ctest.log | head -20
tar czf $OUT/r.tgz -C $OUT r
$B/benchmarks/arfusion-bench --out $R/sweep > $R/sweep.txt 2>&1; ts sweep
grep -E "auto slower|auto >" $R/sweep.txt
tar czf $OUT/r.tgz -C $OUT r
for tool in memcheck racecheck synccheck initcheck; do
  l=$(left); [ $l -gt 45 ] || break
  w=$(( l - 30 )); [ $w -gt 100 ] && w=100
  SAN_TOOLS=$tool SAN_WAIT_S=$w SAN_LIMIT_S=$(( w + 20 )) SAN_RACE_LIMIT_S=$(( w + 20 )) OUT=$R tools/device_check.sh sanitize 2>&1 | head -3; ts $tool
done
tar czf $OUT/r.tgz -C $OUT r
