#!/usr/bin/env bash
# Session 21 call 7 (bench only, a measurement): per-block %globaltimer marks of the one-shot at
# 128 x 8192 (fused: the held one-block kernel; plain allreduce; 64 x 8192 fused), thread 0 of
# every block, the last two calls of a 20-call graph (mk_trace21.py, trace21.cpp).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=$PWD/benchmarks/results/2026-11-30-h200x2-v21/call7
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
rm -rf /tmp/T && mkdir /tmp/T && git ls-files -z | xargs -0 cp --parents -t /tmp/T && cp $E/trace21.cpp /tmp/T/benchmarks/ \
  && python3 $E/mk_trace21.py /tmp/T \
  && cmake -S /tmp/T -B /tmp/bT -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > $R/cmake.log 2>&1 \
  && cmake --build /tmp/bT -j "$(nproc)" --target trace21 > $R/build.log 2>&1; ts "build rc=$?"
(cd $R && timeout 60 /tmp/bT/benchmarks/trace21 > $R/trace.txt 2>&1); ts "trace rc=$?"
tar czf $OUT/r.tgz -C $OUT r
cat $R/trace.txt; cat $R/times.txt; tail -5 $R/build.log
