#!/usr/bin/env bash
# Session 20 call 2 (bench only): variants of main b87c82b, each built from a copy of the tree
# plus a patch, sm_90a, bench targets only.
#   M : main (held operands in the cluster kernels, a runtime branch).
#   VH: held operands as kernels of their own (template kHeld): every Lamport one-shot launch of
#       one row per unit (R == 1) runs them, one-block grids too (128 x 8192), and the plain
#       allreduce holds its input. Registers without the runtime branch: bf16 kVpt 2 one-block
#       126, cluster 134, no spill.
#   H1: VH, the call header peeked after the last vector's sum instead of the first.
#   H0: VH without the call header (no push, no check): what the header costs. Not landable.
# gbench x3 (M and VH all benchmarks; H1 and H0 the one-shot and Auto ones), VH's default sweep.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=$PWD/benchmarks/results/2026-11-30-h200x2-v20/call2
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpus.txt 2>&1
bb() {  # name, patch or empty
  rm -rf /tmp/$1 && mkdir /tmp/$1 && git ls-files -z | xargs -0 cp --parents -t /tmp/$1 && { [ -z "$2" ] || (cd /tmp/$1 && patch -p1 < $2 > /dev/null); } \
  && cmake -S /tmp/$1 -B /tmp/b$1 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null \
  && cmake --build /tmp/b$1 -j 8 --target bench_arfusion arfusion-bench > $R/build-$1.log 2>&1; echo "$1 build rc=$?" > $R/rc-$1.txt
}
bb M "" & bb VH $E/vh-held-kernels.patch & bb H1 $E/h1.patch & bb H0 $E/h0.patch &
wait; ts "$(cat $R/rc-*.txt | tr '\n' ' ')"
F='(auto_fused|oneshot_fused|oneshot_allreduce|nccl_path_fused)/'
for i in 1 2 3; do
  for v in M VH; do timeout 60 /tmp/b$v/benchmarks/bench_arfusion --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1; done
  for v in H1 H0; do timeout 60 /tmp/b$v/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1; done
done; ts gbench
python3 tools/gbtable.py $(for v in M VH H1 H0; do for i in 1 2 3; do echo $v=$R/gb-$v-$i.json; done; done) > $R/ab.txt 2>&1
timeout 60 /tmp/bVH/benchmarks/arfusion-bench --out $R/sweep-VH > $R/sweep-VH.txt 2>&1; ts "sweep rc=$?"
tar czf $OUT/r.tgz -C $OUT r
cat $R/times.txt
grep -E '^(nccl_path_fused|auto_fused|oneshot_fused|oneshot_allreduce)/(1|4|8|16|32|64|128)/(4096|8192)/' $R/ab.txt | awk '{print $1, $2, $3, $4, $5, $6}'
tail -3 $R/sweep-VH.txt
