#!/usr/bin/env bash
# Session 8, call 6: are the sporadic slow measurements of call 5 (sweep, e1 build) the e1 change?
# Sweeps and gbench of e1 (working tree) and head (cf0650b + check fix), interleaved.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
for v in head e1; do
  ( rm -rf /tmp/$v && mkdir -p /tmp/$v && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools cmake /tmp/$v/ && if [ $v = e1 ]; then cp -r src /tmp/$v/src; else cp -r exp/$v/src /tmp/$v/src; fi && cd /tmp/$v && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null && cmake --build b -j 16 --target bench_arfusion arfusion-bench > build.log 2>&1; echo "$v build rc=$?" ) &
done
wait; ts builds
for i in 1 2; do for v in e1 head; do
  timeout 60 /tmp/$v/b/benchmarks/arfusion-bench --out $R/sweep-$v-$i > $R/sweep-$v-$i.txt 2>&1; ts sweep $v $i; grep -E "auto slower" $R/sweep-$v-$i.txt
done; done
for v in e1 head; do /tmp/$v/b/benchmarks/bench_arfusion --benchmark_out=$R/gb-$v-3.json --benchmark_out_format=json > $R/gb-$v-3.txt 2>&1; done; ts gbench
tar czf $OUT/r.tgz -C $OUT r
