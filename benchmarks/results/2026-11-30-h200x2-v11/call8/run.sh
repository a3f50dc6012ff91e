#!/usr/bin/env bash
# Session 11, call 8: the arfusion-bench sweep (116 sizes, bf16 + fp16, hidden 4096 + 8192) of the
# kernels with the Lamport two-shot, to place Auto's one-shot / two-shot crossover by measurement.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpus.txt 2>&1
cmake -S . -B build-sw -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null \
  && cmake --build build-sw -j 32 --target arfusion-bench > $R/build.log 2>&1; ts build rc=$?
timeout 120 build-sw/benchmarks/arfusion-bench --out $R/sweep > $R/sweep.txt 2>&1; ts sweep rc=$?
grep -v "^measured" $R/sweep.txt | head -140
tar czf $OUT/r.tgz -C $OUT r
