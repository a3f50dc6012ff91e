#!/usr/bin/env bash
# Session 9, call 2: candidate = working tree (call 1's + the loading probe through
# cuModuleEnumerateFunctions + fresh-process ctest entries); "libnopre" = the candidate without the
# library's preloading (the test's own kernels still preloaded): is the library's preload needed?
# Then sanitizers, sweep and one more benchmark run of the candidate.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
left() { echo $(( 570 - ($(date +%s) - T0) )); }
( rm -rf /tmp/lnp && mkdir -p /tmp/lnp && cp -r CMakeLists.txt CMakePresets.json include benchmarks tools tests cmake /tmp/lnp/ && cp -r exp/libnopre/src /tmp/lnp/ && cd /tmp/lnp && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build b -j 6 --target test_gpu > build.log 2>&1; echo "libnopre build rc=$?"; tail -2 build.log ) > $R/build-libnopre.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; tail -1 $R/build.txt
wait; cat $R/build-libnopre.txt; ts builds
B=build-h200
timeout 60 ctest --test-dir $B -R gpu_fresh -V > $R/fresh-new.log 2>&1; ts fresh-new rc=$?
grep -E "kernels|OK \]|FAILED \]|SKIPPED \]|Skipped|tests passed" $R/fresh-new.log | head
timeout 60 /tmp/lnp/b/tests/test_gpu --gtest_filter='Loading.*' > $R/loading-libnopre.log 2>&1; ts loading-libnopre rc=$?
grep -E "kernels|OK \]|FAILED \]|Skipped|loaded" $R/loading-libnopre.log | head -5
for k in 1 2 3 4; do
  timeout 40 /tmp/lnp/b/tests/test_gpu --gtest_filter='*TwoCommunicators*' > $R/twocomm-libnopre-$k.log 2>&1
  echo "libnopre $k rc=$?" >> $R/twocomm.txt
done; ts twocomm-libnopre
cat $R/twocomm.txt | tr '\n' ' '; echo
tar czf $OUT/r.tgz -C $OUT r
$B/benchmarks/arfusion-bench --out $R/sweep > $R/sweep.txt 2>&1; ts sweep
grep -E "auto slower|auto >" $R/sweep.txt
$B/benchmarks/bench_arfusion --benchmark_out=$R/gb-new-3.json --benchmark_out_format=json > $R/gb-new-3.txt 2>&1; ts gbench
tar czf $OUT/r.tgz -C $OUT r
for tool in memcheck racecheck synccheck initcheck; do
  l=$(left); [ $l -gt 45 ] || break
  w=$(( l - 30 )); [ $w -gt 100 ] && w=100
  SAN_TOOLS=$tool SAN_WAIT_S=$w SAN_LIMIT_S=$(( w + 20 )) SAN_RACE_LIMIT_S=$(( w + 20 )) OUT=$R tools/device_check.sh sanitize 2>&1 | head -3; ts $tool
done
tar czf $OUT/r.tgz -C $OUT r
