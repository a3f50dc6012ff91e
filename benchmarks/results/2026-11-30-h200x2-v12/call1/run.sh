#!/usr/bin/env bash
# Session 12, call 1: multi-unit Lamport two-shot. head = HEAD (99ef3cd); e2 = tree with
# ARF_EXP=2 (Lamport area 72 MiB/peer, two-shot R capped to the Lamport region, Lamport two-shot
# for every GridDependency two-shot call); e3 = ARF_EXP=3 (128 MiB/peer). gbench x2 interleaved;
# all GPU tests + sanitizers on e2.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
left() { echo $(( 560 - ($(date +%s) - T0) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpus.txt 2>&1
bb() { # name src-dir exp
  rm -rf /tmp/$1 && mkdir -p /tmp/$1 && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools cmake /tmp/$1/ && cp -r $2 /tmp/$1/src && cd /tmp/$1 \
  && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF -DCMAKE_CUDA_FLAGS=-DARF_EXP=$3 -DCMAKE_CXX_FLAGS=-DARF_EXP=$3 > /dev/null \
  && cmake --build b -j 4 --target bench_arfusion > build.log 2>&1; echo "$1 build rc=$?"; }
( bb head $PWD/exp/head/src 0 ) > $R/build-head.txt 2>&1 &
( bb e3 $PWD/src 3 ) > $R/build-e3.txt 2>&1 &
B=build-e2
{ cmake -S . -B $B -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-DARF_EXP=2 -DCMAKE_CXX_FLAGS=-DARF_EXP=2 && cmake --build $B -j 8; } > $R/build.log 2>&1; echo "e2 build rc=$?" | tee -a $R/times.txt
wait; cat $R/build-head.txt $R/build-e3.txt; ts builds
F='run/(auto_fused|nccl_path_fused|twoshot_fused|twoshot_allreduce|peer_store)/[0-9]+/(4096|8192)/1/'
for i in 1 2; do for v in head e2 e3; do
  b=/tmp/$v/b; [ $v = e2 ] && b=$B
  timeout 60 $b/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
done; done; ts gbench
python3 exp/gbtable.py head=$R/gb-head-1.json head=$R/gb-head-2.json e2=$R/gb-e2-1.json e2=$R/gb-e2-2.json e3=$R/gb-e3-1.json e3=$R/gb-e3-2.json > $R/ab.txt
grep -E "^(auto_fused|twoshot_fused|twoshot_allreduce|nccl_path_fused)/(512|2048|8192)/(4096|8192)/1 |peer_store" $R/ab.txt
tar czf $OUT/r.tgz -C $OUT r
timeout 250 ctest --test-dir $B --output-on-failure --timeout 240 -L gpu -V > $R/ctest.log 2>&1; ts ctest rc=$?
grep -E "tests passed|^soak|process soak|all [0-9]+ kernels|FAILED|Failure|Test +#" $R/ctest.log | head -20
tar czf $OUT/r.tgz -C $OUT r
for tool in memcheck racecheck synccheck; do
  l=$(left); [ $l -gt 45 ] || break
  w=$(( l - 30 )); [ $w -gt 80 ] && w=80
  SAN_TOOLS=$tool SAN_WAIT_S=$w SAN_LIMIT_S=$(( w + 20 )) SAN_RACE_LIMIT_S=$(( w + 20 )) OUT=$R B=$B bash -c 'sed "s/^B=build-h200/B=\${B}/" tools/device_check.sh > /tmp/dc.sh; bash /tmp/dc.sh sanitize' 2>&1 | head -3; ts $tool
done
tar czf $OUT/r.tgz -C $OUT r
