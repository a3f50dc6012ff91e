#!/usr/bin/env bash
# Session 8, call 4: one-shot kernels instantiated per vectors-per-thread (1, 2, 4) vs HEAD (base):
# gbench A/B alternating on the one-shot paths, per-warp trace with epoch/input marks, GPU tests.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
( rm -rf /tmp/base && mkdir -p /tmp/base && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools cmake /tmp/base/ && cp -r exp/base/src /tmp/base/src && cd /tmp/base && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null && cmake --build b -j 10 --target bench_arfusion > build.log 2>&1; echo "base build rc=$?" ) > $R/build-base.txt 2>&1 &
bash exp/tr2/build.sh /tmp/tr2 > $R/build-trace2.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; tail -1 $R/build.txt
wait; cat $R/build-base.txt; tail -1 $R/build-trace2.txt
B=build-h200
F='run/(oneshot_fused|oneshot_allreduce|oneshot_flag_fused|auto_fused)/'
for i in 1 2; do
  /tmp/base/b/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/base-$i.json --benchmark_out_format=json > $R/base-$i.txt 2>&1
  $B/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/new-$i.json --benchmark_out_format=json > $R/new-$i.txt 2>&1
done
timeout 60 /tmp/tr2/trace2 > $R/trace2.txt 2>&1; head -40 $R/trace2.txt
tar czf $OUT/r.tgz -C $OUT r
timeout 240 ctest --test-dir $B --output-on-failure --timeout 230 -L gpu > $R/ctest.txt 2>&1
echo "ctest rc=$?"; grep -E "tests passed|FAILED|Failed" $R/ctest.txt | head
tar czf $OUT/r.tgz -C $OUT r
