#!/usr/bin/env bash
# Session 23, call 3 (H200 pair). Main = a6dad5a. Variants: MRG = RowEpilogue's runHeld and
# runInRegisters on one core (epilogue-merge.patch; the fp32 held one-shot kernel is rescheduled),
# S64 / S96 = the two-shot's step cap at 64 / 96 KiB per peer and phase instead of 128.
# gbench A/B (3 runs), fp32 sweeps of main and MRG at hidden 2048/4096 up to 256 KiB (2 each),
# ARFUSION_MAX_BLOCKS on main for the two-shot shapes, then MRG's GPU tests by filter.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v23
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
export VARIANTS="MRG=$E/epilogue-merge.patch S64=$E/twoshot-step-64k.patch S96=$E/twoshot-step-96k.patch"
VARIANT_TARGETS="test_gpu bench_arfusion arfusion-bench" OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
B=build-h200/benchmarks/bench_arfusion
for mb in 64 96 112 120 128 132; do
  ARFUSION_MAX_BLOCKS=$mb timeout 60 $B --benchmark_filter='(auto_fused|twoshot_allreduce)/(512|2048|8192)/(4096|8192)/1' > $R/maxblocks-$mb.txt 2>&1
done; ts "max blocks"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
AB_RUNS=3 AB_FILTER='(auto_fused|oneshot_fused|twoshot_fused|twoshot_allreduce|nccl_path_fused)/' OUT=$R timeout 150 bash tools/device_check.sh ab > /dev/null 2>&1; ts ab
for i in 1 2; do for l in main MRG; do
  bin=/tmp/arf-MRG/build/benchmarks/arfusion-bench; [ $l = main ] && bin=build-h200/benchmarks/arfusion-bench
  timeout 60 $bin --dtypes fp32 --hidden 2048,4096 --max-bytes 262144 --out $R/sweep-fp32-$l-$i > $R/sweep-fp32-$l-$i.txt 2>&1
done; done; ts "fp32 sweeps"
timeout 150 /tmp/arf-MRG/build/tests/test_gpu --gtest_filter='ThreadsNccl2.*:Ranks/LocalGroup.*:Sanitize.*:AddRMSNorm.*' > $R/mrg-tests.txt 2>&1; ts "MRG tests rc=$?"
tar czf $OUT/r.tgz -C $OUT r
grep -E "^\[ +(FAILED|PASSED) +\]|tests ran" $R/mrg-tests.txt | head; cat $R/times.txt
