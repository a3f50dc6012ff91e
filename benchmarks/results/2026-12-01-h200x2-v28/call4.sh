#!/usr/bin/env bash
# Session 28, call 4 (H200 pair). Evict-first stores, A/B: OLD = 168ecf6; CS0 = 168ecf6 +
# cs-stores.patch (every local output store and Lamport clear evict-first); CSRC = 168ecf6 +
# csrc.patch (residual_out and the Lamport clears evict-first, norm_out and allreduce out as
# before: the next GEMM reads norm_out at once). gbench auto_fused/twoshot_allreduce/nccl_path at
# every registered shape, 3 rounds; then arfusion-decode-bench (80 layers, batch 1..256: cuBLAS GEMMs
# read norm_out right after the fused op) per variant, twice.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; V=$PWD/benchmarks/results/2026-12-01-h200x2-v28
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
bld() { cmake -S /tmp/$1 -B /tmp/b$1 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null \
  && cmake --build /tmp/b$1 -j 10 --target bench_arfusion arfusion-decode-bench > $R/build-$1.log 2>&1; echo "$1 rc=$?" > $R/rc-$1.txt; }
for v in OLD CS0 CSRC; do rm -rf /tmp/$v && mkdir /tmp/$v && git archive 168ecf6 | tar x -C /tmp/$v; done
(cd /tmp/CS0 && patch -p1 < $V/cs-stores.patch > /dev/null) && (cd /tmp/CSRC && patch -p1 < $V/csrc.patch > /dev/null)
( bld OLD ) & ( bld CS0 ) & ( bld CSRC ) &
wait; ts "$(cat $R/rc-*.txt | tr '\n' ' ')"
F='^run/(auto_fused|twoshot_allreduce|nccl_path_fused|twoshot_fused|peer_store)/'
args=""
for i in 1 2 3; do for v in OLD CS0 CSRC; do
  timeout 90 /tmp/b$v/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
  args="$args $v=$R/gb-$v-$i.json"
done; done; ts gbench
python3 tools/gbtable.py $args > $R/ab.txt 2>&1
for i in 1 2; do for v in OLD CS0 CSRC; do
  [ $(( $(date +%s) - T0 )) -gt 500 ] && break
  timeout 60 /tmp/b$v/benchmarks/arfusion-decode-bench > $R/decode-$v-$i.txt 2>&1
done; done; ts decode
tar czf $OUT/r.tgz -C $OUT r
grep -E '^(auto_fused|twoshot_allreduce|twoshot_fused|peer_store)/' $R/ab.txt; for f in $R/decode-*.txt; do echo "== $f"; tail -9 $f; done; cat $R/times.txt
