#!/usr/bin/env bash
# Session 12, call 2: Lamport poll back-off cap (ARF_BACKOFF, cycles; landed 512) x larger Lamport
# area / multi-unit Lamport two-shot (ARF_EXP=2, call 1). head = HEAD; b2 = tree, EXP 0, cap 2048;
# e2 = EXP 2 cap 512; e2b2 = EXP 2 cap 2048; e2b8 = EXP 2 cap 8192. gbench x2 interleaved.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpus.txt 2>&1
bb() { # name src-dir flags
  rm -rf /tmp/$1 && mkdir -p /tmp/$1 && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools cmake /tmp/$1/ && cp -r $2 /tmp/$1/src && cd /tmp/$1 \
  && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF "-DCMAKE_CUDA_FLAGS=$3" "-DCMAKE_CXX_FLAGS=$3" > /dev/null \
  && cmake --build b -j 6 --target bench_arfusion > build.log 2>&1; echo "$1 build rc=$?"; }
( bb head $PWD/exp/head/src "" ) > $R/build-head.txt 2>&1 &
( bb b2 $PWD/src "-DARF_BACKOFF=2048" ) > $R/build-b2.txt 2>&1 &
( bb e2 $PWD/src "-DARF_EXP=2" ) > $R/build-e2.txt 2>&1 &
( bb e2b2 $PWD/src "-DARF_EXP=2 -DARF_BACKOFF=2048" ) > $R/build-e2b2.txt 2>&1 &
( bb e2b8 $PWD/src "-DARF_EXP=2 -DARF_BACKOFF=8192" ) > $R/build-e2b8.txt 2>&1 &
wait; cat $R/build-*.txt; ts builds
F='run/(auto_fused|nccl_path_fused|oneshot_fused|twoshot_fused|oneshot_allreduce|twoshot_allreduce|peer_store)/[0-9]+/(4096|8192)/1/'
V="head b2 e2 e2b2 e2b8"
for i in 1 2; do for v in $V; do
  timeout 60 /tmp/$v/b/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
done; done; ts gbench
python3 exp/gbtable.py $(for v in $V; do echo $v=$R/gb-$v-1.json $v=$R/gb-$v-2.json; done) > $R/ab.txt
grep -E "^(auto_fused|oneshot_fused|twoshot_fused|twoshot_allreduce|oneshot_allreduce)/" $R/ab.txt | cut -c1-160
tar czf $OUT/r.tgz -C $OUT r
