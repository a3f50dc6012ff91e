#!/usr/bin/env bash
# Session 11, call 5: head (HEAD's kernels) vs clean (next-row L2 prefetch in the two-shot) vs early
# (clean + the first rows' input/residual prefetched before each wait: -DARF_EXP_EARLY).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
( rm -rf /tmp/head && mkdir -p /tmp/head && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools cmake /tmp/head/ && cp -r exp/head/src /tmp/head/src && cd /tmp/head && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null && cmake --build b -j 8 --target bench_arfusion > build.log 2>&1; echo "head build rc=$?" ) &
for v in clean early; do
  f=""; [ $v = early ] && f="-DARF_EXP_EARLY"
  ( cmake -S . -B build-$v -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF -DCMAKE_CUDA_FLAGS="$f" > /dev/null && cmake --build build-$v --target bench_arfusion -j 8 > $R/build-$v.log 2>&1; echo "build $v rc=$?" ) &
done
wait
F='run/(twoshot_fused|twoshot_allreduce|nccl_path_fused)/(16|128|512|2048|8192)/(4096|8192)/1/'
args=""
for rep in 1 2; do for v in head clean early; do
  b=build-$v; [ $v = head ] && b=/tmp/head/b
  timeout 60 $b/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-$v-$rep.json --benchmark_out_format=json > $R/gb-$v-$rep.txt 2>&1
  args="$args $v=$R/gb-$v-$rep.json"
done; done
python3 exp/gbtable.py $args > $R/ab.txt
cat $R/ab.txt
tar czf $OUT/r.tgz -C $OUT r
