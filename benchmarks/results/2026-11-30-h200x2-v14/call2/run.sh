#!/usr/bin/env bash
# Session 14 call 2: microtest bisection of the racecheck report, then the split two-shot with
# (B) a __syncwarp before the finishers' barrier, (C) B + waits without barrier.red, under racecheck;
# the GPU tests and a benchmark A/B (head vs B, or C if only C is clean).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
X=benchmarks/results/2026-11-30-h200x2-v13/experiments
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
mk() {  # variant dir, targets...
  local v=$1; shift
  rm -rf /tmp/$v && mkdir /tmp/$v && git archive HEAD | tar x -C /tmp/$v && (cd /tmp/$v && git apply $OLDPWD/$X/split-steps-next.patch && cp $OLDPWD/exp/$v/twoshot.cu src/kernels/twoshot.cu) \
    && (cd /tmp/$v && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-lineinfo > /dev/null \
        && cmake --build b -j 12 --target "$@" > $R/build-$v.log 2>&1); echo "build $v rc=$?"
}
mk B test_gpu test_gpu_procs bench_arfusion > $R/mkB.txt 2>&1 &
mk C test_gpu_procs > $R/mkC.txt 2>&1 &
( cmake -S . -B build-h200 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build build-h200 -j 6 --target bench_arfusion > $R/build-head.log 2>&1 ) &
nvcc -arch=sm_90a -lineinfo -o /tmp/nbr2 exp/nbr2.cu && for m in 1 3 4 5 6 7 8 9; do
  timeout 60 compute-sanitizer --tool racecheck --racecheck-report hazard /tmp/nbr2 $m > $R/nbr2-$m.log 2>&1
  echo "microtest mode $m: $(grep -E 'RACECHECK SUMMARY' $R/nbr2-$m.log)" | tee -a $R/times.txt
done
wait; cat $R/mk?.txt; ts builds
SAN="compute-sanitizer --tool racecheck --error-exitcode 9 --print-limit 20 --kernel-name-exclude kns=nccl --target-processes all"
for v in B C; do
ARFTEST_SAN_BLOCKS=8 ARFTEST_SELF_CHECK=0 ARFTEST_TIMEOUT_S=60 timeout 90 $SAN /tmp/$v/b/tests/test_gpu_procs \
  --gtest_filter='Processes.SanitizeSmallShapes' > $R/racecheck-$v.log 2>&1; ts "racecheck $v rc=$? $(grep -E 'RACECHECK SUMMARY' $R/racecheck-$v.log | tr '\n' ' ')"
done
tar czf $OUT/r.tgz -C $OUT r
timeout 250 ctest --test-dir /tmp/B/b --output-on-failure --timeout 240 -L gpu > $R/ctest-B.log 2>&1; ts "ctest B rc=$?"
for i in 1 2; do for v in head B; do
  b=build-h200; [ $v = B ] && b=/tmp/B/b
  timeout 60 $b/benchmarks/bench_arfusion --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
done; done; ts gbench
tar czf $OUT/r.tgz -C $OUT r
