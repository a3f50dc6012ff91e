#!/usr/bin/env bash
# Session 23, call 6 (H200 pair, the last ~250 device seconds): microbench/ce.cu, copy engines
# against SM stores, chunked copies, SM + copy-engine hybrids, and each beside an HBM-bound kernel.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; M=benchmarks/results/2026-11-30-h200x2-v23/microbench
nvcc -O3 -arch=sm_90a -o /tmp/ce $M/ce.cu > $R/build.txt 2>&1 || { cat $R/build.txt; exit 1; }
timeout 100 /tmp/ce 8 32 128 2>&1 | tee $R/ce.txt
timeout 60 /tmp/ce 32 128 > $R/ce-2.txt 2>&1
tar czf $OUT/r.tgz -C $OUT r
