#!/usr/bin/env bash
# Session 13, call 4: split tail (-DARF_EXP_SPLIT: half the block pushes the next unit's RS while
# the other half finishes this unit's peer rows) vs HEAD, at forced steps (ARF_EXP_STEPS); tests.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
bb() { # name src-dir extra-flags targets...
  local n=$1 s=$2 f=$3; shift 3
  rm -rf /tmp/$n && mkdir -p /tmp/$n && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools cmake /tmp/$n/ && cp -r $s /tmp/$n/src && cd /tmp/$n \
  && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS=$f" "-DCMAKE_CUDA_FLAGS=$f" > /dev/null \
  && cmake --build b -j 8 --target "$@" > build.log 2>&1; echo "$n build rc=$?"; tail -3 build.log; }
( bb head $PWD/exp/head/src "" bench_arfusion ) > $R/build-head.txt 2>&1 &
( bb st $PWD/src "" bench_arfusion ) > $R/build-st.txt 2>&1 &
( bb sp $PWD/src "-DARF_EXP_SPLIT" bench_arfusion test_gpu test_gpu_procs ) > $R/build-sp.txt 2>&1 &
wait; cat $R/build-head.txt $R/build-st.txt $R/build-sp.txt; ts builds
F='run/(twoshot_fused|twoshot_allreduce|peer_store)/(512|2048|8192)/(4096|8192)/1/'
gb() { # label bin env...
  local l=$1 b=$2; shift 2
  env "$@" timeout 90 $b --benchmark_filter="$F" --benchmark_out=$R/gb-$l.json --benchmark_out_format=json > $R/gb-$l.txt 2>&1 || echo "$l rc=$?"
}
for i in 1 2; do
  gb head-$i /tmp/head/b/benchmarks/bench_arfusion
  gb st2-$i /tmp/st/b/benchmarks/bench_arfusion ARF_EXP_STEPS=2
  for S in 0 2 3 4; do gb sp$S-$i /tmp/sp/b/benchmarks/bench_arfusion ARF_EXP_STEPS=$S; done
  ts "gbench round $i"
done
args=""; for l in head st2 sp0 sp2 sp3 sp4; do args="$args $l=$R/gb-$l-1.json $l=$R/gb-$l-2.json"; done
python3 exp/gbtable.py $args > $R/ab.txt
cat $R/ab.txt
tar czf $OUT/r.tgz -C $OUT r
ARF_EXP_STEPS=2 ARFTEST_TIMEOUT_S=5 timeout 220 /tmp/sp/b/tests/test_gpu > $R/test-sp2.log 2>&1; ts "test_gpu sp steps2 rc=$?"
grep -E "^\[  (FAILED|PASSED) |OK \]|Failure|soak" $R/test-sp2.log | head -60
tar czf $OUT/r.tgz -C $OUT r
ARF_EXP_STEPS=3 ARFTEST_TIMEOUT_S=5 timeout 90 /tmp/sp/b/tests/test_gpu_procs > $R/procs-sp3.log 2>&1; ts "procs sp steps3 rc=$?"
grep -E "^\[  (FAILED|PASSED) |Failure" $R/procs-sp3.log | head
tar czf $OUT/r.tgz -C $OUT r
