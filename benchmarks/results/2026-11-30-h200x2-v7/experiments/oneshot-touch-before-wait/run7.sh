#!/usr/bin/env bash
# Session 7, call 7: one-shot A/B: HEAD vs touching the input (L2 prefetch) and the peers' slot headers before the grid-dependency wait.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
rm -rf /tmp/pf && mkdir -p /tmp/pf && cp -r CMakeLists.txt CMakePresets.json include src benchmarks tests tools cmake /tmp/pf/ && cp exp/oneshot_prefetch.cu /tmp/pf/src/kernels/oneshot.cu
(cmake -S /tmp/pf -B /tmp/pf/b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null && cmake --build /tmp/pf/b -j 16 --target bench_arfusion > $R/build-pf.txt 2>&1; tail -1 $R/build-pf.txt) &
(cmake -S . -B build-h200 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null && cmake --build build-h200 -j 16 --target bench_arfusion > $R/build.txt 2>&1; tail -1 $R/build.txt) &
wait
F='(nccl_path_fused|oneshot_fused|oneshot_allreduce)/(1|16|128)/(4096|8192)/'
for i in 1 2 3; do
  build-h200/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/head-$i.json --benchmark_out_format=json > /dev/null 2>&1
  /tmp/pf/b/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/pf-$i.json --benchmark_out_format=json > /dev/null 2>&1
done
python3 exp/gbt.py head=$R/head-1.json head=$R/head-2.json head=$R/head-3.json pf=$R/pf-1.json pf=$R/pf-2.json pf=$R/pf-3.json | tee $R/table.txt
tar czf $OUT/r.tgz -C $OUT r
