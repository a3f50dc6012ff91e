#!/usr/bin/env bash
# Session 26, call 6 (H200 pair): 26e6427 (kernelForWorld, host dispatch only; kernels' PTX
# identical). Build, the two-rank shape and loading tests, one gbench run of the Auto shapes.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
timeout 60 build-h200/tests/test_gpu --gtest_filter='ThreadsNccl2.EveryDtypeStrategySyncAndShape:Loading.*' > $R/test_gpu.txt 2>&1; ts "test_gpu rc=$? $(tail -1 $R/test_gpu.txt)"
timeout 20 build-h200/benchmarks/bench_arfusion --benchmark_filter='^run/(auto_fused|nccl_path_fused)/(1|128|512|2048|8192)/8192/1/' > $R/gb.txt 2>&1; ts gbench
tar czf $OUT/r.tgz -C $OUT r
cat $R/times.txt; grep -E 'auto_fused|nccl_path' $R/gb.txt | awk '{print $1, $2}'
