#!/usr/bin/env bash
# Session 5, device call 1: pipelined Lamport one-shot (4 slots) + residual-before-wait, against HEAD;
# gamma-early variant; step size via workspace; GPU tests; sanitizers on processes.
# (exp/old-src held `git archive b3f5003 src`; the tree held pipelined-lamport-oneshot.patch plus
# the residual/gamma change of norm_epilogue.cuh, gamma behind -DARF_EXP_GAMMA_EARLY.)
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
main() {
  rm -rf /tmp/old && mkdir -p /tmp/old && tar cf - --exclude=./build-h200 --exclude=./exp --exclude=./build . | tar xf - -C /tmp/old
  rm -rf /tmp/old/src && cp -r exp/old-src /tmp/old/src
  CM="-G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF"
  ( cmake -S /tmp/old -B /tmp/old/b $CM && cmake --build /tmp/old/b -j 5 ) > $R/build-old.log 2>&1 &
  ( cmake -S . -B /tmp/g $CM -DCMAKE_CUDA_FLAGS=-DARF_EXP_GAMMA_EARLY && cmake --build /tmp/g -j 5 ) > $R/build-g.log 2>&1 &
  OUT=$R tools/device_check.sh build; ts build new
  wait; ts builds; tail -1 $R/build-old.log $R/build-g.log
  gb() { $1/benchmarks/bench_arfusion --benchmark_out=$R/$2.json --benchmark_out_format=json ${3:-} > $R/$2.txt 2>&1; }
  for rep in 1 2; do
    gb /tmp/old/b old-r$rep; gb build-h200 new-r$rep; gb /tmp/g gam-r$rep
  done; ts gbench
  F="--benchmark_filter=run/(oneshot_fused|oneshot_allreduce|twoshot_fused)/(512|2048|8192)/8192/1/"
  for ws in 32 128 256; do ARFUSION_WORKSPACE_MB=$ws gb build-h200 new-ws$ws "$F"; done; ts ws
  build-h200/benchmarks/arfusion-bench --out $R/sweep > $R/sweep.txt 2>&1; ts sweep
  grep -E "auto slower|auto >" $R/sweep.txt
  ctest --test-dir build-h200 --output-on-failure --timeout 250 -L gpu > $R/ctest.log 2>&1; ts ctest
  grep -E "tests passed|Test +#|soak|FAILED|Failure|Which is" $R/ctest.log | head -30
}
export -f main ts; export R T0
timeout 560 bash -c main
tar czf $OUT/r.tgz -C $OUT r
