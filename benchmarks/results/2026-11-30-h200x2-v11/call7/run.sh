#!/usr/bin/env bash
# Session 11, call 7: candidate = working tree (Lamport two-shot for one-unit calls in GridDependency mode)
# vs head = HEAD (5241a7f kernels: flag two-shot with the row prefetch).
# gbench A/B x2 interleaved (every benchmark), every GPU test, memcheck/racecheck/synccheck.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
left() { echo $(( 560 - ($(date +%s) - T0) )); }
( rm -rf /tmp/head && mkdir -p /tmp/head && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools cmake /tmp/head/ && cp -r exp/head/src /tmp/head/src && cd /tmp/head && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null && cmake --build b -j 6 --target bench_arfusion > build.log 2>&1; echo "head build rc=$?" ) > $R/build-head.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; tail -1 $R/build.txt
wait; cat $R/build-head.txt; ts builds
B=build-h200
for i in 1 2; do for v in head new; do
  b=/tmp/head/b; [ $v = new ] && b=$B
  $b/benchmarks/bench_arfusion --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
done; done; ts gbench
python3 exp/gbtable.py head=$R/gb-head-1.json head=$R/gb-head-2.json new=$R/gb-new-1.json new=$R/gb-new-2.json > $R/ab.txt
grep -E "^(auto_fused|twoshot_fused|twoshot_allreduce|oneshot_fused)/(1/4096|16/8192|128/8192|256/8192|512/4096|512/8192|2048/4096|2048/8192)/1 " $R/ab.txt
tar czf $OUT/r.tgz -C $OUT r
timeout 260 ctest --test-dir $B --output-on-failure --timeout 250 -L gpu -V > $R/ctest.log 2>&1; ts ctest rc=$?
grep -E "tests passed|^soak|process soak|all [0-9]+ kernels|FAILED|Failure|Test +#" $R/ctest.log | head -20
tar czf $OUT/r.tgz -C $OUT r
for tool in memcheck racecheck synccheck; do
  l=$(left); [ $l -gt 45 ] || break
  w=$(( l - 30 )); [ $w -gt 80 ] && w=80
  SAN_TOOLS=$tool SAN_WAIT_S=$w SAN_LIMIT_S=$(( w + 20 )) SAN_RACE_LIMIT_S=$(( w + 20 )) OUT=$R tools/device_check.sh sanitize 2>&1 | head -3; ts $tool
done
tar czf $OUT/r.tgz -C $OUT r
