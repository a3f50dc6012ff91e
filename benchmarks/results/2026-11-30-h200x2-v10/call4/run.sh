#!/usr/bin/env bash
# Session 10, call 4: split one-shot (pusher SMs, reader SMs), ARF_EXP_SPLIT=1; gbench A/B, GPU tests with it.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; tail -1 $R/build.txt; ts build
B=build-h200
F='run/(oneshot_fused|oneshot_allreduce|twoshot_fused|twoshot_allreduce|nccl_path_fused|peer_store)/(1|16|128|256|512|2048|8192)/(4096|8192)/1'
for i in 1 2; do for p in 0 1; do
  ARF_EXP_SPLIT=$p timeout 100 $B/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-p$p-$i.json --benchmark_out_format=json > $R/gb-p$p-$i.txt 2>&1
  echo "p$p-$i rc=$?"
done; done; ts gbench
python3 exp/gbtable.py p0=$R/gb-p0-1.json p0=$R/gb-p0-2.json split=$R/gb-p1-1.json split=$R/gb-p1-2.json > $R/ab.txt
cat $R/ab.txt
grep -m3 -E "oneshot_fused/512/8192" $R/gb-p1-1.txt
tar czf $OUT/r.tgz -C $OUT r
ARF_EXP_SPLIT=1 timeout 300 ctest --test-dir $B --output-on-failure --timeout 280 -L gpu -V > $R/ctest-split.log 2>&1; ts ctest rc=$?
grep -E "tests passed|^soak|process soak|all [0-9]+ kernels|FAILED|Failure|Test +#|timed out|waited" $R/ctest-split.log | head -30
tar czf $OUT/r.tgz -C $OUT r
