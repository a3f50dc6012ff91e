#!/usr/bin/env bash
# Session 9, call 1: candidate = working tree (kernel preloading at commCreate, the two-shot per
# vectors per thread, one variant dispatch); "head" = HEAD 57acba5 (bench only); "nopre" = the
# candidate without the library's and the test's preloading (test_gpu only), to see whether the
# two-communicator timeout is a lazy-loading deadlock.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
env | grep -E "^CUDA_MODULE|^NCCL" > $R/env.txt; nvidia-smi -L > $R/gpus.txt 2>&1
( rm -rf /tmp/head && mkdir -p /tmp/head && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools cmake /tmp/head/ && cp -r exp/head/src /tmp/head/src && cd /tmp/head && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null && cmake --build b -j 5 --target bench_arfusion > build.log 2>&1; echo "head build rc=$?"; tail -3 build.log ) > $R/build-head.txt 2>&1 &
( rm -rf /tmp/nopre && mkdir -p /tmp/nopre && cp -r CMakeLists.txt CMakePresets.json include benchmarks tools cmake /tmp/nopre/ && cp -r exp/nopre/src exp/nopre/tests /tmp/nopre/ && cd /tmp/nopre && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build b -j 5 --target test_gpu > build.log 2>&1; echo "nopre build rc=$?"; tail -3 build.log ) > $R/build-nopre.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; tail -2 $R/build.txt
wait; cat $R/build-head.txt $R/build-nopre.txt; ts builds
B=build-h200
# 1. Does the loading test fail without the preload, pass with it? (fresh processes)
timeout 60 /tmp/nopre/b/tests/test_gpu --gtest_filter='Loading.*' > $R/loading-nopre.log 2>&1; ts loading-nopre rc=$?
timeout 60 $B/tests/test_gpu --gtest_filter='Loading.*' > $R/loading-new.log 2>&1; ts loading-new rc=$?
grep -hE "kernels|OK|FAILED|SKIP" $R/loading-nopre.log $R/loading-new.log | head
# 2. The two-communicator test, each run a fresh process: without preloading, then with.
for v in nopre new; do
  b=/tmp/nopre/b; [ $v = new ] && b=$B
  for k in 1 2 3 4 5 6; do
    timeout 40 $b/tests/test_gpu --gtest_filter='*TwoCommunicators*' > $R/twocomm-$v-$k.log 2>&1
    echo "$v $k rc=$?" >> $R/twocomm.txt
  done
  ts twocomm-$v
done
cat $R/twocomm.txt | tr '\n' ' '; echo
grep -h "timeout on device" $R/twocomm-*.log | head -3
tar czf $OUT/r.tgz -C $OUT r
# 3. A/B benchmarks, interleaved.
for i in 1 2; do for v in head new; do
  b=/tmp/head/b; [ $v = new ] && b=$B
  $b/benchmarks/bench_arfusion --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
done; done; ts gbench
python3 exp/gbtable.py head=$R/gb-head-1.json head=$R/gb-head-2.json new=$R/gb-new-1.json new=$R/gb-new-2.json > $R/ab.txt
grep -E "^(auto_fused|twoshot_fused|oneshot_fused|nccl_path_fused|add_rmsnorm)/(1/4096|16/8192|128/8192|512/8192|2048/8192|8192/8192)/1 " $R/ab.txt
tar czf $OUT/r.tgz -C $OUT r
# 4. Every GPU test.
timeout 250 ctest --test-dir $B --output-on-failure --timeout 240 -L gpu -V > $R/ctest.log 2>&1; ts ctest rc=$?
grep -E "tests passed|^soak|process soak|all [0-9]+ kernels|FAILED|Failure" $R/ctest.log | head -20
# 5. The two-communicator test 20 times in one process.
timeout 60 $B/tests/test_gpu --gtest_filter='*TwoCommunicators*' --gtest_repeat=20 --gtest_break_on_failure > $R/twocomm-repeat.log 2>&1; ts twocomm-repeat rc=$?
tar czf $OUT/r.tgz -C $OUT r
