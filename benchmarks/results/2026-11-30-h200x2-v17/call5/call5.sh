#!/usr/bin/env bash
# Session 17 call 5: what the Lamport one-shot's clears cost (clear2.patch, -DARF_EXP_CLEAR2: every
# 16-byte pack cleared twice; the second store is asm volatile so it is not merged), bench only,
# decode shapes, 3 rounds. Logs under $OUT/r, archive $OUT/r.tgz.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
for k in 1 2; do
  flag=; [ $k = 2 ] && flag=-DARF_EXP_CLEAR2
  ( cmake -S . -B /tmp/c$k -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF \
      "-DCMAKE_CUDA_FLAGS=$flag" > /dev/null \
      && cmake --build /tmp/c$k -j 16 --target bench_arfusion > $R/build-c$k.log 2>&1; echo "c$k rc=$?" > $R/rc-c$k.txt ) &
done; wait; ts "$(cat $R/rc-c*.txt | tr '\n' ' ')"
F='--benchmark_filter=(auto_fused|oneshot_allreduce)/(1|16|128)/(4096|8192)/1'
for i in 1 2 3; do for k in 1 2; do
  timeout 30 /tmp/c$k/benchmarks/bench_arfusion "$F" --benchmark_out=$R/gb-c$k-$i.json --benchmark_out_format=json > $R/gb-c$k-$i.txt 2>&1
done; done; ts gbench
python3 tools/gbtable.py $(for k in 1 2; do for i in 1 2 3; do echo clear$k=$R/gb-c$k-$i.json; done; done) > $R/ab.txt 2>&1
tar czf $OUT/r.tgz -C $OUT r
cat $R/ab.txt
