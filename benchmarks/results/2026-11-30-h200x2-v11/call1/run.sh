#!/usr/bin/env bash
# Session 11, call 1: row-epilogue variants, compile time (ARF_EXP bits): 1 one barrier per row,
# 2 gamma of vector 1 early, 4 L2 prefetch of the next row's residual, 8 L2 prefetch of the next
# row's sources, 16 residuals of the unit's rows at its start, 32 (two-shot) peer rows' residuals
# while the all-gather is in flight. Two interleaved gbench runs per variant.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpus.txt 2>&1
V="0 1 5 25 57 3"
for e in $V; do
  ( cmake -S . -B build-e$e -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS="-DARF_EXP=$e" > $R/cfg-$e.log 2>&1 \
    && cmake --build build-e$e --target bench_arfusion -j 6 > $R/build-$e.log 2>&1; echo "build $e rc=$?" ) &
done
wait
F='run/(oneshot_fused|twoshot_fused|nccl_path_fused)/(1|128|512|2048|8192)/(4096|8192)/1/'
args=""
for rep in 1 2; do
  for e in $V; do
    timeout 60 build-e$e/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-$e-$rep.json --benchmark_out_format=json > $R/gb-$e-$rep.txt 2>&1
    echo "run $e $rep rc=$?"
    args="$args e$e=$R/gb-$e-$rep.json"
  done
done
python3 exp/gbtable.py $args > $R/ab.txt
cat $R/ab.txt
tar czf $OUT/r.tgz -C $OUT r
