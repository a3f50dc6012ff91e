#!/usr/bin/env bash
# Session 28, call 3 (H200 pair). Trace of the flag two-shot at 2048 x 8192 (one unit per block):
# T = 168ecf6 + trace/mk_trace28.py (per-block %globaltimer marks, trace/trace28.cpp), fused and
# plain allreduce, to see where the 12 us between them go. Plus a gbench A/B of 168ecf6 (OLD)
# against 168ecf6 + cs-stores.patch (CS0: every storePack evict-first), 3 rounds.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; V=$PWD/benchmarks/results/2026-12-01-h200x2-v28
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
bld() { cmake -S /tmp/$1 -B /tmp/b$1 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null \
  && cmake --build /tmp/b$1 -j 10 --target $2 > $R/build-$1.log 2>&1; echo "$1 rc=$?" > $R/rc-$1.txt; }
for v in vT OLD CS0; do rm -rf /tmp/$v && mkdir /tmp/$v && git archive 168ecf6 | tar x -C /tmp/$v; done
cp $V/trace/trace28.cpp /tmp/vT/benchmarks/ && python3 $V/trace/mk_trace28.py /tmp/vT
(cd /tmp/CS0 && patch -p1 < $V/cs-stores.patch > /dev/null)
( bld vT trace28 ) & ( bld OLD bench_arfusion ) & ( bld CS0 bench_arfusion ) &
wait; ts "$(cat $R/rc-*.txt | tr '\n' ' ')"
timeout 90 /tmp/bvT/benchmarks/trace28 > $R/trace.txt 2>&1; ts "trace rc=$?"
F='^run/((auto_fused|twoshot_fused|twoshot_allreduce)/(512|2048|8192)/(4096|8192)/1/|peer_store/(2048|8192)/)'
args=""
for i in 1 2 3; do for v in OLD CS0; do
  timeout 60 /tmp/b$v/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
  args="$args $v=$R/gb-$v-$i.json"
done; done; ts gbench
python3 tools/gbtable.py $args > $R/ab.txt 2>&1
tar czf $OUT/r.tgz -C $OUT r
cat $R/trace.txt | head -120; grep -E '^(auto_fused|twoshot_fused|twoshot_allreduce|peer_store)/' $R/ab.txt; cat $R/times.txt
