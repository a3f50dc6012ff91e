#!/usr/bin/env bash
# Session 9, call 3: the committed tree (9becfc7 + docs) once more: every GPU test through ctest
# (with the fresh-process entries). Experiment "steps" (host-only variant of plan.cpp): at least N
# synchronised steps per block from ARF_EXP_TWOSHOT_STEPS / ARF_EXP_ONESHOT_STEPS, to see whether
# smaller steps (more pipelining, more flags, a shorter tail) pay at the target shapes.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
( rm -rf /tmp/steps && mkdir -p /tmp/steps && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools cmake /tmp/steps/ && cp -r exp/steps/src /tmp/steps/src && cd /tmp/steps && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null && cmake --build b -j 6 --target bench_arfusion > build.log 2>&1; echo "steps build rc=$?"; tail -1 build.log ) > $R/build-steps.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; tail -1 $R/build.txt
wait; cat $R/build-steps.txt; ts builds
S=/tmp/steps/b/benchmarks/bench_arfusion
for i in 1 2; do
  for n in 1 2 3 4; do
    ARF_EXP_TWOSHOT_STEPS=$n $S --benchmark_filter='run/(twoshot_fused|twoshot_allreduce)/(512|2048|8192)/' --benchmark_out=$R/ts-$n-$i.json --benchmark_out_format=json > /dev/null 2>&1
  done
  for n in 1 2 4; do
    ARF_EXP_ONESHOT_STEPS=$n $S --benchmark_filter='run/(oneshot_fused|oneshot_allreduce)/(128|256|512)/' --benchmark_out=$R/os-$n-$i.json --benchmark_out_format=json > /dev/null 2>&1
  done
done; ts steps
python3 exp/gbtable.py s1=$R/ts-1-1.json s1=$R/ts-1-2.json s2=$R/ts-2-1.json s2=$R/ts-2-2.json s3=$R/ts-3-1.json s3=$R/ts-3-2.json s4=$R/ts-4-1.json s4=$R/ts-4-2.json > $R/twoshot-steps.txt
python3 exp/gbtable.py s1=$R/os-1-1.json s1=$R/os-1-2.json s2=$R/os-2-1.json s2=$R/os-2-2.json s4=$R/os-4-1.json s4=$R/os-4-2.json > $R/oneshot-steps.txt
cat $R/twoshot-steps.txt $R/oneshot-steps.txt | cut -c1-260
tar czf $OUT/r.tgz -C $OUT r
B=build-h200
timeout 280 ctest --test-dir $B --output-on-failure --timeout 270 -L gpu -V > $R/ctest.log 2>&1; ts ctest rc=$?
grep -E "tests passed|^soak|process soak|all [0-9]+ kernels|FAILED|Failure|Test +#" $R/ctest.log | head -20
tar czf $OUT/r.tgz -C $OUT r
