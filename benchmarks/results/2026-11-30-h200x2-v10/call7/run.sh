#!/usr/bin/env bash
# Session 10, call 7: as call 6, and the reader block runs two rows at once (two 8-warp halves,
# runGathered in the block layout), ARF_EXP_SPLIT=1; gbench A/B and the main GPU tests.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; tail -1 $R/build.txt
B=build-h200
F='run/(oneshot_fused|oneshot_allreduce|twoshot_fused|nccl_path_fused)/(1|128|512|2048|8192)/(4096|8192)/1'
for i in 1 2; do for p in 0 1; do
  ARF_EXP_SPLIT=$p timeout 100 $B/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-p$p-$i.json --benchmark_out_format=json > $R/gb-p$p-$i.txt 2>&1
done; done
python3 exp/gbtable.py p0=$R/gb-p0-1.json p0=$R/gb-p0-2.json split=$R/gb-p1-1.json split=$R/gb-p1-2.json > $R/ab.txt
grep -vE "nccl_path_fused/(1|128|256)/" $R/ab.txt
tar czf $OUT/r.tgz -C $OUT r
ARF_EXP_SPLIT=1 timeout 150 $B/tests/test_gpu --gtest_filter='ThreadsNccl2.EveryDtype*:ThreadsNccl2.SmallWorkspace*:ThreadsNccl2.NaN*:Ranks/LocalGroup.*:Paths/Faults.*' > $R/test-split.log 2>&1; echo "tests rc=$?"
grep -E "FAILED|Failure|PASSED|soak" $R/test-split.log | head -20
tar czf $OUT/r.tgz -C $OUT r
