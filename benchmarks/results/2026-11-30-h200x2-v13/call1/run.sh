#!/usr/bin/env bash
# Session 13, call 1: flag reduce-scatter + Lamport all-gather two-shot (ARF_EXP_AG=lag) vs HEAD.
# new = working tree built with a 72 MiB Lamport area per peer (-DARF_EXP_LAMPORT_MIB=72).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpus.txt 2>&1
bb() { # name src-dir extra-flags targets...
  local n=$1 s=$2 f=$3; shift 3
  rm -rf /tmp/$n && mkdir -p /tmp/$n && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools cmake /tmp/$n/ && cp -r $s /tmp/$n/src && cd /tmp/$n \
  && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS=$f" "-DCMAKE_CUDA_FLAGS=$f" > /dev/null \
  && cmake --build b -j 8 --target "$@" > build.log 2>&1; echo "$n build rc=$?"; tail -5 build.log; }
( bb head $PWD/exp/head/src "" bench_arfusion ) > $R/build-head.txt 2>&1 &
( bb new $PWD/src "-DARF_EXP_LAMPORT_MIB=72" bench_arfusion test_gpu test_gpu_procs ) > $R/build-new.txt 2>&1 &
wait; cat $R/build-head.txt $R/build-new.txt; ts builds
F='run/(auto_fused|nccl_path_fused|twoshot_fused|twoshot_allreduce|peer_store)/(256|512|2048|8192)/(4096|8192)/1/'
gb() { # label bin env...
  local l=$1 b=$2; shift 2
  env "$@" timeout 90 $b --benchmark_filter="$F" --benchmark_out=$R/gb-$l.json --benchmark_out_format=json > $R/gb-$l.txt 2>&1 || echo "$l rc=$?"
}
for i in 1 2; do
  gb head-$i /tmp/head/b/benchmarks/bench_arfusion
  gb off-$i /tmp/new/b/benchmarks/bench_arfusion
  for L in 0 1 2; do gb ag$L-$i /tmp/new/b/benchmarks/bench_arfusion ARF_EXP_AG=$L; done
  ts "gbench round $i"
done
python3 exp/gbtable.py head=$R/gb-head-1.json head=$R/gb-head-2.json off=$R/gb-off-1.json off=$R/gb-off-2.json \
  ag0=$R/gb-ag0-1.json ag0=$R/gb-ag0-2.json ag1=$R/gb-ag1-1.json ag1=$R/gb-ag1-2.json ag2=$R/gb-ag2-1.json ag2=$R/gb-ag2-2.json > $R/ab.txt
cat $R/ab.txt
tar czf $OUT/r.tgz -C $OUT r
ARF_EXP_AG=1 ARFTEST_TIMEOUT_S=5 timeout 200 /tmp/new/b/tests/test_gpu > $R/test-ag1.log 2>&1; ts "test_gpu ag1 rc=$?"
grep -E "^\[  (FAILED|PASSED) |OK \]|Failure|soak" $R/test-ag1.log | head -60
tar czf $OUT/r.tgz -C $OUT r
ARF_EXP_AG=2 ARFTEST_TIMEOUT_S=5 timeout 90 /tmp/new/b/tests/test_gpu_procs > $R/procs-ag2.log 2>&1; ts "procs ag2 rc=$?"
grep -E "^\[  (FAILED|PASSED) |Failure" $R/procs-ag2.log | head
tar czf $OUT/r.tgz -C $OUT r
