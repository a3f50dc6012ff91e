#!/usr/bin/env bash
# Session 14 call 3: racecheck of the .aligned named barrier (bar.sync id, count, after __syncwarp)
# in the microtest (each mode twice: the non-aligned reports varied between identical runs) and in
# the split two-shot (variant D); memcheck/synccheck of D; GPU tests and benchmark A/B head vs D.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
X=benchmarks/results/2026-11-30-h200x2-v13/experiments
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
v=D; rm -rf /tmp/$v && mkdir /tmp/$v && git archive HEAD | tar x -C /tmp/$v && (cd /tmp/$v && git apply $OLDPWD/$X/split-steps-next.patch && cp $OLDPWD/exp/$v/twoshot.cu $OLDPWD/exp/$v/sync.cuh src/kernels/) \
  && (cd /tmp/$v && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-lineinfo > /dev/null \
      && cmake --build b -j 12 --target test_gpu test_gpu_procs bench_arfusion > $R/build-$v.log 2>&1) > /dev/null 2>&1 &
( cmake -S . -B build-h200 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build build-h200 -j 4 --target bench_arfusion > $R/build-head.log 2>&1 ) &
nvcc -arch=sm_90a -lineinfo -o /tmp/nbr2 exp/nbr2.cu && for al in 0 1; do for m in 1 4 6 8; do for k in 1 2; do
  timeout 60 compute-sanitizer --tool racecheck --racecheck-report hazard /tmp/nbr2 $m $al > $R/nbr2-$m-$al-$k.log 2>&1
  echo "microtest mode $m aligned $al run $k: $(grep -E 'RACECHECK SUMMARY' $R/nbr2-$m-$al-$k.log)" | tee -a $R/times.txt
done; done; done
timeout 60 compute-sanitizer --tool synccheck /tmp/nbr2 8 1 > $R/nbr2-synccheck.log 2>&1; echo "microtest synccheck: $(tail -1 $R/nbr2-synccheck.log)" | tee -a $R/times.txt
wait; ts "builds $(ls /tmp/D/b/tests/test_gpu_procs build-h200/benchmarks/bench_arfusion)"
for tool in racecheck racecheck memcheck synccheck; do
  SAN="compute-sanitizer --tool $tool --error-exitcode 9 --report-api-errors no --print-limit 20 --kernel-name-exclude kns=nccl --target-processes all"
  ARFTEST_SAN_BLOCKS=8 ARFTEST_SELF_CHECK=0 ARFTEST_TIMEOUT_S=60 timeout 120 $SAN /tmp/D/b/tests/test_gpu_procs \
    --gtest_filter='Processes.SanitizeSmallShapes' > $R/$tool-D-$(date +%s).log 2>&1; ts "$tool D rc=$? $(grep -hE 'SUMMARY' $R/$tool-D-*.log | tail -1)"
done
tar czf $OUT/r.tgz -C $OUT r
timeout 250 ctest --test-dir /tmp/D/b --output-on-failure --timeout 240 -L gpu > $R/ctest-D.log 2>&1; ts "ctest D rc=$?"
for i in 1 2; do for v in head D; do
  b=build-h200; [ $v = D ] && b=/tmp/D/b
  timeout 60 $b/benchmarks/bench_arfusion --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
done; done; ts gbench
tar czf $OUT/r.tgz -C $OUT r
