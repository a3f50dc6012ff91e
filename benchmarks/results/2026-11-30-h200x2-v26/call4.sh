#!/usr/bin/env bash
# Session 26, call 4 (H200 pair). Tree = call 3's + Auto's narrow-row rule (plan.cpp
# narrowRowsToNccl: the NCCL path above 10 rows per block of at most 512 B and above 36 of at most
# 1 KB; host code only). The CPU tests and every GPU ctest entry; the narrow-row sweep again (Auto
# against the NCCL path); one full gbench run.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
build-h200/tests/test_cpu > $R/test_cpu.txt 2>&1; ts "test_cpu rc=$? $(tail -1 $R/test_cpu.txt)"
CTEST_ARGS="-L gpu" timeout 250 env OUT=$R bash tools/device_check.sh tests > $R/tests.txt 2>&1; ts "ctest"
B=build-h200/benchmarks
timeout 60 $B/arfusion-bench --min-bytes 262144 --max-bytes 67108864 --per-octave 2 --dtypes bf16 --hidden 64,128,256,512,1024 --out $R/narrow > $R/narrow.txt 2>&1; ts "narrow sweep"
timeout 25 $B/bench_arfusion --benchmark_out=$R/gb-main-1.json --benchmark_out_format=json > $R/gb-main-1.txt 2>&1; ts gbench
rm -f $R/*/*.png
tar czf $OUT/r.tgz -C $OUT r
tail -4 $R/tests.txt; cat $R/times.txt
