#!/usr/bin/env bash
# Session 10, call 8: split one-shot (call 6's: four Lamport slots, pusher halves) with 1, 2 or 3
# reader SMs per pushing SM (ARF_EXP_SPLIT=1|2|3); one gbench run each, and a test subset at 3.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; tail -1 $R/build.txt
B=build-h200
F='run/(oneshot_fused|oneshot_allreduce|twoshot_fused)/(1|512|2048|8192)/(4096|8192)/1'
for p in 0 1 2 3; do
  ARF_EXP_SPLIT=$p timeout 40 $B/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-p$p.json --benchmark_out_format=json > $R/gb-p$p.txt 2>&1
done
python3 exp/gbtable.py p0=$R/gb-p0.json m1=$R/gb-p1.json m2=$R/gb-p2.json m3=$R/gb-p3.json > $R/ab.txt
cat $R/ab.txt
tar czf $OUT/r.tgz -C $OUT r
ARF_EXP_SPLIT=3 timeout 45 $B/tests/test_gpu --gtest_filter='ThreadsNccl2.EveryDtype*:Ranks/LocalGroup.Soak*:Paths/Faults.AbortReleases*' > $R/test-m3.log 2>&1; echo "tests rc=$?"
grep -E "FAILED|Failure|PASSED|soak" $R/test-m3.log | head -12
tar czf $OUT/r.tgz -C $OUT r
