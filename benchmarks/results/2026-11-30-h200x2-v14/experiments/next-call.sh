#!/usr/bin/env bash
# NOT RUN (written at the end of session 14): a first device call for the next session, from the
# repository root on the 2-GPU machine (nvidia-h200-x2), about 8 minutes. Logs under $OUT/r, one
# archive $OUT/r.tgz. Three trees built side by side:
#   head     - main as landed (the split two-shot);
#   helpers  - + epilogue-helpers.patch (the epilogue's residual add and scaling as two helpers:
#              same operations per element, PTX reordered; lands if the A/B is flat);
#   prefetch - + residual-prefetch.patch (the peers' residual rows of a unit into L2 before the
#              wait for their sums: aims at the HBM-bound last-step tail, 2048 x 8192 126 us vs 110).
# Then: benchmark A/B (2 runs each), the 8-256 MB sweep of the landed tree (none since it landed),
# and every GPU test of the prefetch tree (its kernel change; the helpers tree is bitwise-equal by
# construction and is tested when it lands).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
X=benchmarks/results/2026-11-30-h200x2-v14/experiments
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
mk() {  # name, patch (or none), targets...
  local v=$1 p=$2; shift 2
  rm -rf /tmp/$v && mkdir /tmp/$v && git archive HEAD | tar x -C /tmp/$v \
    && { [ $p = none ] || (cd /tmp/$v && git apply $OLDPWD/$X/$p); } \
    && (cd /tmp/$v && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release > /dev/null \
        && cmake --build b -j 6 --target "$@" > $R/build-$v.log 2>&1); echo "build $v rc=$?"
}
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpus.txt 2>&1
mk head none bench_arfusion arfusion-bench > $R/mk-head.txt 2>&1 &
mk helpers epilogue-helpers.patch bench_arfusion > $R/mk-helpers.txt 2>&1 &
mk prefetch residual-prefetch.patch bench_arfusion test_gpu test_gpu_procs > $R/mk-prefetch.txt 2>&1 &
wait; ts "builds: $(cat $R/mk-*.txt | tr '\n' ' ')"
for i in 1 2; do for v in head helpers prefetch; do
  timeout 60 /tmp/$v/b/benchmarks/bench_arfusion --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
done; done; ts gbench
tar czf $OUT/r.tgz -C $OUT r
timeout 90 /tmp/head/b/benchmarks/arfusion-bench --hidden 4096,8192,16384 --dtypes bf16,fp32 --min-bytes 8388608 \
  --max-bytes 268435456 --per-octave 1 --out $R/sweep-head > $R/sweep-head.txt 2>&1; ts "sweep rc=$?"
tar czf $OUT/r.tgz -C $OUT r
timeout 250 ctest --test-dir /tmp/prefetch/b --output-on-failure --timeout 240 -L gpu > $R/ctest-prefetch.log 2>&1; ts "ctest prefetch rc=$?"
tar czf $OUT/r.tgz -C $OUT r
