#!/usr/bin/env bash
# Session 10, call 5: bidirectional push capacity by pushing SMs (exp/lsu/bidir.cu), and the split
# one-shot with 4 or 16 packs in flight per pushing thread (ARF_EXP_SPLIT=1 / 2).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
( OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1 ) &
nvcc -O3 -arch=sm_90a -std=c++17 exp/lsu/bidir.cu -o /tmp/bidir && /tmp/bidir | tee $R/bidir.txt
wait; tail -1 $R/build.txt
B=build-h200
F='run/(oneshot_fused|oneshot_allreduce)/(1|128|512|2048|8192)/(8192)/1'
for i in 1 2; do for p in 0 1 2; do
  ARF_EXP_SPLIT=$p timeout 100 $B/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-p$p-$i.json --benchmark_out_format=json > $R/gb-p$p-$i.txt 2>&1
done; done
python3 exp/gbtable.py p0=$R/gb-p0-1.json p0=$R/gb-p0-2.json split4=$R/gb-p1-1.json split4=$R/gb-p1-2.json split16=$R/gb-p2-1.json split16=$R/gb-p2-2.json > $R/ab.txt
cat $R/ab.txt
tar czf $OUT/r.tgz -C $OUT r
