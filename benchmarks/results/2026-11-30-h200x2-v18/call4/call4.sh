#!/usr/bin/env bash
# Session 18 call 4: the rule's edge, bench only. Auto and the plain one-shot at 1-32 tokens with
# rows over clusters as main plans them (ARFUSION_MAX_BLOCKS unset: 4 blocks per row up to 128 KiB),
# and with max_blocks capped so that the same shapes take 2 blocks per row (16) or one (8): at up to
# 8 tokens one block per row is the same grid as without clusters. 3 rounds. Logs under $OUT/r.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
cmake -S . -B /tmp/b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null \
  && cmake --build /tmp/b -j 16 --target bench_arfusion > $R/build.log 2>&1; ts "build rc=$?"
F='--benchmark_filter=(auto_fused|oneshot_allreduce)/(1|4|8|16|32)/(4096|8192)/1'
for i in 1 2 3; do for m in 0 16 8; do
  ARFUSION_MAX_BLOCKS=$m timeout 60 /tmp/b/benchmarks/bench_arfusion "$F" --benchmark_out=$R/gb-m$m-$i.json --benchmark_out_format=json > $R/gb-m$m-$i.txt 2>&1
done; done; ts gbench
python3 tools/gbtable.py $(for m in 8 16 0; do for i in 1 2 3; do echo m$m=$R/gb-m$m-$i.json; done; done) > $R/ab.txt 2>&1
tar czf $OUT/r.tgz -C $OUT r
cat $R/ab.txt; for m in 0 16 8; do grep -h "auto_fused/8/8192\|auto_fused/16/4096\|auto_fused/32/4096" $R/gb-m$m-1.txt | cut -c1-30,150-260; done
