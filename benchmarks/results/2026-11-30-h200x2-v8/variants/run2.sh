#!/usr/bin/env bash
# Session 8, call 2: which change moves which one-shot shape. v0 HEAD; v1 32-bit push index (+ wait
# slow path split, same code); v2 v1 + rank loop not unrolled (call 1's tree); v3 v1 + noinline wait slow path.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
for v in v0 v1 v2 v3; do
  ( rm -rf /tmp/$v && mkdir -p /tmp/$v && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools cmake /tmp/$v/ && cp -r exp/$v/src /tmp/$v/src && cd /tmp/$v && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null && cmake --build b -j 8 --target bench_arfusion > build.log 2>&1; echo "$v build rc=$?" ) &
done
wait
F='run/(oneshot_fused|oneshot_allreduce)/'
for i in 1 2; do for v in v0 v1 v2 v3; do
  /tmp/$v/b/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/$v-$i.json --benchmark_out_format=json > $R/$v-$i.txt 2>&1
done; done
python3 exp/gbtable.py v0=$R/v0-1.json v1=$R/v1-1.json v2=$R/v2-1.json v3=$R/v3-1.json v0=$R/v0-2.json v1=$R/v1-2.json v2=$R/v2-2.json v3=$R/v3-2.json > $R/table.txt
tar czf $OUT/r.tgz -C $OUT r
