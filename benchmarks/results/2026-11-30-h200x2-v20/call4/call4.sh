#!/usr/bin/env bash
# Session 20 call 4: the main job's default sweep of main 799eff8, twice (call 3's sweep hit the
# call's time limit, and its rerun on that machine showed spikes in every column, the NCCL path's
# too). Bench targets only.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpus.txt 2>&1
{ cmake -S . -B build-h200 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF \
  && cmake --build build-h200 -j "$(nproc)" --target arfusion-bench; } > $R/build.log 2>&1; ts "build rc=$?"
for i in 1 2; do timeout 80 build-h200/benchmarks/arfusion-bench --out $R/sweep-$i > $R/sweep-$i.txt 2>&1; ts "sweep $i rc=$?"; done
tar czf $OUT/r.tgz -C $OUT r
cat $R/times.txt; for i in 1 2; do tail -2 $R/sweep-$i.txt | head -1; done
