#!/usr/bin/env bash
# Session 12, call 4: the tree with Auto's token floor (two-shot from 160 tokens and above 1 MiB at
# 2 x H200). gbench x2 of the landed tree (the final table); a sweep at hidden 4096/8192/16384,
# bf16 and fp32, 256 KB..32 MB (Auto's pick against the faster fused strategy); every GPU test.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; tail -1 $R/build.txt; ts build
B=build-h200
F='run/(auto_fused|nccl_path_fused|oneshot_fused|twoshot_fused|oneshot_allreduce|twoshot_allreduce|add_rmsnorm|peer_store|peer_copy)/[0-9]+/(4096|8192)/1/'
for i in 1 2; do
  timeout 60 $B/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-$i.json --benchmark_out_format=json > $R/gb-$i.txt 2>&1
done; ts gbench
python3 exp/gbtable.py a=$R/gb-1.json a=$R/gb-2.json > $R/table.txt
grep -E "^(auto_fused|nccl_path_fused)/" $R/table.txt
timeout 120 $B/benchmarks/arfusion-bench --hidden 4096,8192,16384 --dtypes bf16,fp32 --min-bytes 262144 --max-bytes 33554432 --per-octave 2 --out $R/sweep > $R/sweep.txt 2>&1; ts sweep rc=$?
tar czf $OUT/r.tgz -C $OUT r
timeout 260 ctest --test-dir $B --output-on-failure --timeout 250 -L gpu -V > $R/ctest.log 2>&1; ts ctest rc=$?
grep -E "tests passed|^soak|process soak|all [0-9]+ kernels|FAILED|Failure|Test +#" $R/ctest.log | head -20
tar czf $OUT/r.tgz -C $OUT r
