#!/usr/bin/env bash
# Session 18 call 5: the main job on main as landed (rows over clusters): the default
# arfusion-bench sweep (116 sizes, bf16 + fp16, hidden 4096 + 8192, 8 KB-256 MB), and small
# messages (8 KB-1 MiB) at other widths (hidden 2048, 2880, 5120, 16384; bf16 + fp32), where
# the rule spreads rows over clusters at up to 128 KiB. Logs under $OUT/r, archive $OUT/r.tgz.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
cmake -S . -B /tmp/b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null \
  && cmake --build /tmp/b -j 16 --target arfusion-bench > $R/build.log 2>&1; ts "build rc=$?"
timeout 100 /tmp/b/benchmarks/arfusion-bench --out $R/sweep > $R/sweep.txt 2>&1; ts "sweep rc=$?"
timeout 100 /tmp/b/benchmarks/arfusion-bench --hidden 2048,2880,5120,16384 --dtypes bf16,fp32 --max-bytes 1048576 \
  --out $R/sweep-small > $R/sweep-small.txt 2>&1; ts "sweep small rc=$?"
tar czf $OUT/r.tgz -C $OUT r
grep -E "^(bf16|fp16|fp32) +(4096|8192) +(1|2|3|4|6|8|11|16) " $R/sweep.txt | head -40
tail -3 $R/sweep.txt; tail -3 $R/sweep-small.txt
