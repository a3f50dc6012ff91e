#!/usr/bin/env bash
# Session 15 call 5: main as landed (1c4c5bb): the default arfusion-bench sweep (116 sizes, bf16 +
# fp16, hidden 4096 + 8192, 8 KB-256 MB), the 8-256 MB sweep at hidden 4096/8192/16384 in bf16 and
# fp32, and one more Google Benchmark run.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpus.txt 2>&1
cmake -S . -B build-sw -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null \
  && cmake --build build-sw -j 32 --target arfusion-bench bench_arfusion > $R/build.log 2>&1; ts build rc=$?
timeout 100 build-sw/benchmarks/arfusion-bench --out $R/sweep > $R/sweep.txt 2>&1; ts sweep rc=$?
tar czf $OUT/r.tgz -C $OUT r
timeout 60 build-sw/benchmarks/arfusion-bench --hidden 4096,8192,16384 --dtypes bf16,fp32 --min-bytes 8388608 \
  --max-bytes 268435456 --per-octave 1 --out $R/sweep-large > $R/sweep-large.txt 2>&1; ts "sweep large rc=$?"
tar czf $OUT/r.tgz -C $OUT r
timeout 60 build-sw/benchmarks/bench_arfusion --benchmark_out=$R/gb.json --benchmark_out_format=json > $R/gb.txt 2>&1; ts "gbench rc=$?"
tail -2 $R/sweep.txt $R/sweep-large.txt
tar czf $OUT/r.tgz -C $OUT r
