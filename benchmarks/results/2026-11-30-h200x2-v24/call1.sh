#!/usr/bin/env bash
# Session 24, call 1 (H200 pair). Main = 9476035 plus this session's records.
# 1. Every GPU ctest entry on main: the first GPU run of 876dfca (the harnesses preload the tests'
#    kernels on every device) and 1752a84; then the soak with all ranks on ONE GPU and the
#    two-communicator test, which relied on the per-scenario preloads that 876dfca removed).
# 2. Bench-only A/B of the Lamport poll's back-off cap in the one-shot (session 21 item 3):
#    V1 = cap 32 cycles in kernels of one vector per thread (kVpt 1), 512 elsewhere;
#    ALL = cap 32 in every one-shot kernel; main = 512 everywhere. gbench 3 rounds, and a bf16
#    sweep up to 1 MiB twice per label.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v24
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
export VARIANTS="V1=$E/pause32-vpt1.patch ALL=$E/pause32-all.patch"
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
CTEST_ARGS="-L gpu" timeout 300 env OUT=$R bash tools/device_check.sh tests > $R/tests.txt 2>&1; ts "ctest"
CUDA_VISIBLE_DEVICES=0 timeout 90 build-h200/tests/test_gpu --gtest_filter='Ranks/LocalGroup.Soak*' > $R/soak1gpu.txt 2>&1; ts "one GPU, soak: rc=$?"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
AB_RUNS=3 OUT=$R timeout 150 bash tools/device_check.sh ab > /dev/null 2>&1; ts ab
for i in 1 2; do for l in main V1 ALL; do
  bin=/tmp/arf-$l/build/benchmarks/arfusion-bench; [ $l = main ] && bin=build-h200/benchmarks/arfusion-bench
  timeout 40 $bin --max-bytes 1048576 --dtypes bf16 --hidden 2048,4096,8192 --out $R/sweep-$l-$i > $R/sweep-$l-$i.txt 2>&1
done; done; ts sweeps
tar czf $OUT/r.tgz -C $OUT r
tail -8 $R/tests.txt; grep -h -E "^\[ +(OK|FAILED) +\]|PASSED|FAILED" $R/soak1gpu.txt | head -20
head -80 $R/ab.txt; cat $R/times.txt
