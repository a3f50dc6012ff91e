#!/usr/bin/env bash
# Session 15 call 2 (nvidia-h200-x2): base = main; s15 = + helpers, trigger barrier, fault hook and
# SplitFault test; eg = s15 + every gamma early (kVpt <= 2); et = s15 + one-shot trigger before
# the header check. Benchmark A/B (3 rounds), GPU tests and sanitizers of s15.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
X=$PWD/exp; R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
tree() {  # name, patches...
  local v=$1; shift
  rm -rf /tmp/$v && mkdir /tmp/$v && git archive HEAD | tar x -C /tmp/$v || return 1
  for p in "$@"; do (cd /tmp/$v && git apply $X/$p) || { echo "apply $p failed"; return 1; }; done
}
bench_only() {
  local v=$1; shift
  tree $v "$@" && (cd /tmp/$v && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release > /dev/null \
    && cmake --build b -j 8 --target bench_arfusion > $R/build-$v.log 2>&1); echo "build $v rc=$?"
}
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpus.txt 2>&1
bench_only base > $R/mk-base.txt 2>&1 &
bench_only eg s15.patch early-gamma.patch > $R/mk-eg.txt 2>&1 &
bench_only et s15.patch early-trigger.patch > $R/mk-et.txt 2>&1 &
{ tree s15 s15.patch && cd /tmp/s15 && OUT=$R/s15 tools/device_check.sh build; } > $R/mk-s15.txt 2>&1 &
wait; ts "builds: $(cat $R/mk-*.txt | tr '\n' ' ')"
ln -sf /tmp/s15/build-h200 /tmp/s15/b
for i in 1 2 3; do for v in base s15 eg et; do
  timeout 60 /tmp/$v/b/benchmarks/bench_arfusion --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
done; done; ts gbench
tar czf $OUT/r.tgz -C $OUT r
(cd /tmp/s15 && timeout 280 ctest --test-dir build-h200 --output-on-failure --timeout 250 -L gpu > $R/ctest-s15.log 2>&1); ts "ctest s15 rc=$? $(grep -E 'tests passed|tests failed' $R/ctest-s15.log)"
grep -E "split fault|timeout reported|SplitFault" $R/ctest-s15.log | head -20 > $R/splitfault.txt
tar czf $OUT/r.tgz -C $OUT r
(cd /tmp/s15 && SAN_LIMIT_S=60 OUT=$R/s15 timeout 150 tools/device_check.sh sanitize > $R/sanitize.txt 2>&1); ts "sanitize $(cat $R/sanitize.txt | tr '\n' ' ')"
tar czf $OUT/r.tgz -C $OUT r
