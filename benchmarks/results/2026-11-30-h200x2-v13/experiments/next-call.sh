#!/usr/bin/env bash
# Written at the end of session 13, run as session 14 call 1 (benchmarks/results/2026-11-30-h200x2-v14/): the first device call of the next session, from the
# repository root on the 2-GPU machine. Settles the racecheck report on the split two-shot
# (README.md here, "Call 4-5"): the microtest with and without barrier.red, then the bar.red-free
# patch under racecheck with line info, then (if clean) the GPU tests and a benchmark A/B against
# the tree without it. Logs under $OUT/r.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
X=benchmarks/results/2026-11-30-h200x2-v13/experiments
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
nvcc -arch=sm_90a -lineinfo -o /tmp/nbr $X/named-bar-red.cu && for m in 0 1 2; do
  compute-sanitizer --tool racecheck --racecheck-report hazard /tmp/nbr $m > $R/named-bar-red-$m.log 2>&1
  echo "microtest mode $m: $(grep -E 'RACECHECK SUMMARY' $R/named-bar-red-$m.log)"
done
rm -rf /tmp/split && mkdir /tmp/split && git archive HEAD | tar x -C /tmp/split && (cd /tmp/split && git apply $OLDPWD/$X/split-steps-next.patch) \
  && (cd /tmp/split && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-lineinfo > /dev/null \
      && cmake --build b -j 16 > $R/build-split.log 2>&1); ts "split build rc=$?"
( cmake -S . -B build-h200 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build build-h200 -j 8 --target bench_arfusion > $R/build-head.log 2>&1 ) &
SAN="compute-sanitizer --tool racecheck --error-exitcode 9 --print-limit 20 --kernel-name-exclude kns=nccl --target-processes all"
ARFTEST_SAN_BLOCKS=8 ARFTEST_SELF_CHECK=0 ARFTEST_TIMEOUT_S=60 timeout 90 $SAN /tmp/split/b/tests/test_gpu_procs \
  --gtest_filter='Processes.SanitizeSmallShapes' > $R/racecheck-split.log 2>&1; ts "racecheck split rc=$? $(grep -E 'RACECHECK SUMMARY' $R/racecheck-split.log | tr '\n' ' ')"
wait
tar czf $OUT/r.tgz -C $OUT r
timeout 280 ctest --test-dir /tmp/split/b --output-on-failure --timeout 270 -L gpu > $R/ctest-split.log 2>&1; ts "ctest split rc=$?"
for i in 1 2; do for v in head split; do
  b=build-h200; [ $v = split ] && b=/tmp/split/b
  timeout 90 $b/benchmarks/bench_arfusion --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
done; done; ts gbench
tar czf $OUT/r.tgz -C $OUT r
