#!/usr/bin/env bash
# Session 11, call 9: the landed tree (Lamport two-shot + the 2 MiB Auto rule), gbench x2 of the
# fused paths and the NCCL path, bf16, every shape.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpus.txt 2>&1
cmake -S . -B build-f -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null \
  && cmake --build build-f -j 32 --target bench_arfusion > $R/build.log 2>&1; ts build rc=$?
F='run/(auto_fused|nccl_path_fused|oneshot_fused|twoshot_fused|oneshot_allreduce|twoshot_allreduce|add_rmsnorm|peer_store)/[0-9]+/(4096|8192)/1/'
for i in 1 2; do
  timeout 60 build-f/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-$i.json --benchmark_out_format=json > $R/gb-$i.txt 2>&1
done; ts gbench
python3 exp/gbtable.py a=$R/gb-1.json a=$R/gb-2.json > $R/table.txt
grep -E "^(auto_fused|twoshot_fused|oneshot_fused|nccl_path_fused)/" $R/table.txt
tar czf $OUT/r.tgz -C $OUT r
