#!/usr/bin/env bash
# Session 12, call 5: why the Lamport two-shot loses at 2048 x 8192. head = HEAD (flag kernel from
# ~12 MB); e1 = 72 MiB Lamport area (2048 x 8192 in one Lamport unit of 8 rows per block);
# e2 = a system fence after the owned rows, before the peer-row epilogue (own all-gather stores
# drained before its loads: session 10 found a pushing SM's loads 3x slower); e3 = both.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
bb() { # name src-dir flags
  rm -rf /tmp/$1 && mkdir -p /tmp/$1 && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools cmake /tmp/$1/ && cp -r $2 /tmp/$1/src && cd /tmp/$1 \
  && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF "-DCMAKE_CUDA_FLAGS=$3" "-DCMAKE_CXX_FLAGS=$3" > /dev/null \
  && cmake --build b -j 8 --target bench_arfusion > build.log 2>&1; echo "$1 build rc=$?"; }
( bb head $PWD/src "" ) > $R/build-head.txt 2>&1 &
( bb e1 $PWD/exp/e5src "-DARF_EXP=1" ) > $R/build-e1.txt 2>&1 &
( bb e2 $PWD/exp/e5src "-DARF_EXP=2" ) > $R/build-e2.txt 2>&1 &
( bb e3 $PWD/exp/e5src "-DARF_EXP=3" ) > $R/build-e3.txt 2>&1 &
wait; cat $R/build-*.txt; ts builds
F='run/(twoshot_fused|twoshot_allreduce|auto_fused)/[0-9]+/(4096|8192)/1/'
V="head e1 e2 e3"
for i in 1 2; do for v in $V; do
  timeout 40 /tmp/$v/b/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
done; done; ts gbench
python3 exp/gbtable.py $(for v in $V; do echo $v=$R/gb-$v-1.json $v=$R/gb-$v-2.json; done) > $R/ab.txt
grep -E "^(twoshot_fused|twoshot_allreduce)/(128|256|512|2048)/" $R/ab.txt | cut -c1-140
tar czf $OUT/r.tgz -C $OUT r
