#!/usr/bin/env bash
# Session 8, call 7: the two-shot instantiated per vectors-per-thread (candidate = working tree) vs
# HEAD f712f0a: gbench A/B x2 (two-shot, Auto), GPU tests without the 1M-call soak, process tests.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
( rm -rf /tmp/head && mkdir -p /tmp/head && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools cmake /tmp/head/ && cp -r exp/head/src /tmp/head/src && cd /tmp/head && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null && cmake --build b -j 12 --target bench_arfusion > build.log 2>&1; echo "head build rc=$?" ) > $R/build-head.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; tail -1 $R/build.txt
wait; cat $R/build-head.txt; ts builds
B=build-h200
F='run/(twoshot_fused|twoshot_allreduce|auto_fused)/'
for i in 1 2; do for v in head new; do
  b=/tmp/head/b; [ $v = new ] && b=$B
  $b/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
done; done; ts gbench
tar czf $OUT/r.tgz -C $OUT r
timeout 120 $B/tests/test_gpu --gtest_filter='-*Soak1M*' > $R/test_gpu.log 2>&1; ts test_gpu rc=$?
grep -E "PASSED|FAILED|soak" $R/test_gpu.log | head
tar czf $OUT/r.tgz -C $OUT r
timeout 70 ctest --test-dir $B -R gpu_processes --output-on-failure --timeout 65 > $R/ctest-procs.log 2>&1; ts procs rc=$?
grep -E "tests passed|soak" $R/ctest-procs.log
tar czf $OUT/r.tgz -C $OUT r
