#!/usr/bin/env bash
# Session 17 call 4: the fused kernels with 1024-thread blocks (threads.patch, -DARF_EXP_THREADS=1024:
# one 16-byte vector per thread at 8192-wide bf16 rows, as the public fused one-shot runs 128 x 8192;
# 64 registers, so the bf16 Lamport one-shot spills 124 bytes) against 512 (main), bench only,
# decode shapes, 3 rounds. Logs under $OUT/r, archive $OUT/r.tgz.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
for k in 512 1024; do
  ( cmake -S . -B /tmp/t$k -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF \
      -DCMAKE_CUDA_FLAGS=-DARF_EXP_THREADS=$k -DCMAKE_CXX_FLAGS=-DARF_EXP_THREADS=$k > /dev/null \
      && cmake --build /tmp/t$k -j 16 --target bench_arfusion > $R/build-t$k.log 2>&1; echo "t$k rc=$?" > $R/rc-t$k.txt ) &
done; wait; ts "$(cat $R/rc-t*.txt | tr '\n' ' ')"
F='--benchmark_filter=(auto_fused|oneshot_allreduce|nccl_path_fused)/(1|16|128)/(4096|8192)/1'
for i in 1 2 3; do for k in 512 1024; do
  timeout 40 /tmp/t$k/benchmarks/bench_arfusion "$F" --benchmark_out=$R/gb-t$k-$i.json --benchmark_out_format=json > $R/gb-t$k-$i.txt 2>&1
done; done; ts gbench
python3 tools/gbtable.py $(for k in 512 1024; do for i in 1 2 3; do echo t$k=$R/gb-t$k-$i.json; done; done) > $R/ab.txt 2>&1
tar czf $OUT/r.tgz -C $OUT r
cat $R/ab.txt; tail -3 $R/gb-t1024-1.txt
