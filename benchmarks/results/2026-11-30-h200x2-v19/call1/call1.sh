#!/usr/bin/env bash
# Session 19 call 1. A = this tree (main 7cf2aba + rows of 32-64 KB over clusters up to 16 tokens,
# plan.cpp oneShotRowBlocks, and the tests' new cluster shapes): full sm_90a build, every GPU
# ctest entry. base = 7cf2aba (bench only). B = A + resid-early.patch (the residuals of a
# thread's two vectors loaded before the first wait; bench only). T = A + mk_trace.py (per-warp
# marks of the Lamport one-shot, trace19). gbench base/A/B x 3 runs, arfusion-bench sweeps of
# base and A at 8 KB-1 MiB (hidden 8192, 16384; bf16, fp32) x 2, the trace, then ctest.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=$PWD/benchmarks/results/2026-11-30-h200x2-v19/call1
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
mk() { rm -rf /tmp/$1 && mkdir /tmp/$1 && git ls-files -z | xargs -0 cp --parents -t /tmp/$1; }
bld() { cmake -S /tmp/$1 -B /tmp/b$1 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null \
  && cmake --build /tmp/b$1 -j 6 --target $2 > $R/build-$1.log 2>&1; echo "$1 rc=$?" > $R/rc-$1.txt; }
rm -rf /tmp/base && mkdir /tmp/base && git archive 7cf2aba | tar x -C /tmp/base
mk vB && (cd /tmp/vB && patch -p1 < $E/resid-early.patch > /dev/null)
mk vT && cp $E/trace19.cpp /tmp/vT/benchmarks/ && python3 $E/mk_trace.py /tmp/vT
( bld base "bench_arfusion arfusion-bench" ) & ( bld vB bench_arfusion ) & ( bld vT trace19 ) &
OUT=$R bash tools/device_check.sh build > $R/check-build.txt 2>&1; ts "A build rc=$?"
wait; ts "$(cat $R/rc-*.txt | tr '\n' ' ')"
timeout 60 /tmp/bvT/benchmarks/trace19 > $R/trace.txt 2>&1; ts "trace rc=$?"
for i in 1 2 3; do
  for v in base A B; do
    b=/tmp/bbase; [ $v = A ] && b=build-h200; [ $v = B ] && b=/tmp/bvB
    timeout 60 $b/benchmarks/bench_arfusion --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
  done
done; ts gbench
python3 tools/gbtable.py $(for v in base A B; do for i in 1 2 3; do echo $v=$R/gb-$v-$i.json; done; done) > $R/ab.txt 2>&1
for i in 1 2; do for v in base A; do
  b=/tmp/bbase; [ $v = A ] && b=build-h200
  timeout 60 $b/benchmarks/arfusion-bench --hidden 8192,16384 --dtypes bf16,fp32 --max-bytes 1048576 --out $R/sw-$v-$i > $R/sw-$v-$i.txt 2>&1
done; done; ts sweeps
tar czf $OUT/r.tgz -C $OUT r
CTEST_ARGS="-L gpu" OUT=$R bash tools/device_check.sh tests > $R/check-tests.txt 2>&1; ts "tests: $(grep -E 'tests passed' $R/check-tests.txt)"
tar czf $OUT/r.tgz -C $OUT r
cat $R/times.txt; tail -5 $R/check-tests.txt
grep -E '^(nccl_path_fused|auto_fused|oneshot_allreduce|twoshot_allreduce|peer_store)/' $R/ab.txt | head -60
grep -A16 "^=== 1 x 4096 fused" $R/trace.txt | head -34
