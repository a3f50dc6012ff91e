#!/usr/bin/env bash
# Session 15 call 3 (nvidia-h200-x2): fin = the tree to land (main + exp/fin.patch). Full build,
# the SplitFault tests with their output, every GPU test, benchmark A/B against main (2 rounds),
# memcheck, racecheck (split off) and synccheck.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
X=$PWD/exp; R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
tree() { rm -rf /tmp/$1 && mkdir /tmp/$1 && git archive HEAD | tar x -C /tmp/$1 && { [ -z "${2:-}" ] || (cd /tmp/$1 && git apply $X/$2); }; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpus.txt 2>&1
{ tree base && cd /tmp/base && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release > /dev/null \
  && cmake --build b -j 8 --target bench_arfusion > $R/build-base.log 2>&1; echo "build base rc=$?"; } > $R/mk-base.txt 2>&1 &
{ tree fin fin.patch && cd /tmp/fin && OUT=$R/fin tools/device_check.sh build; } > $R/mk-fin.txt 2>&1 &
wait; ts "builds: $(cat $R/mk-*.txt | tr '\n' ' ')"
cd /tmp/fin
timeout 60 build-h200/tests/test_gpu --gtest_filter='SplitFault*' > $R/splitfault.log 2>&1; ts "SplitFault rc=$? $(grep -E 'split fault|PASSED|FAILED|SKIPPED' $R/splitfault.log | tr '\n' ' ')"
timeout 280 ctest --test-dir build-h200 --output-on-failure --timeout 250 -L gpu > $R/ctest-fin.log 2>&1; ts "ctest fin rc=$? $(grep -E 'tests passed|tests failed' $R/ctest-fin.log)"
tar czf $OUT/r.tgz -C $OUT r
for i in 1 2; do for v in base fin; do
  b=/tmp/$v/b; [ $v = fin ] && b=/tmp/fin/build-h200
  timeout 60 $b/benchmarks/bench_arfusion --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
done; done; ts gbench
tar czf $OUT/r.tgz -C $OUT r
SAN_TOOLS="memcheck racecheck synccheck" SAN_LIMIT_S=60 OUT=$R/fin timeout 130 tools/device_check.sh sanitize > $R/sanitize.txt 2>&1; ts "sanitize $(cat $R/sanitize.txt | tr '\n' ' ')"
tar czf $OUT/r.tgz -C $OUT r
