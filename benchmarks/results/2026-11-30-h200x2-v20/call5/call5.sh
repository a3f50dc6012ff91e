#!/usr/bin/env bash
# Session 20 call 5 (bench only, not landed): T1 = main + the Lamport two-shot loading its first
# owned row's input, residual and gamma into registers before its push (kVpt <= 2, ops with a
# residual; bf16 kVpt 2 spills 4 bytes). M = main. gbench x3 of the two-shot and Auto shapes.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=$PWD/benchmarks/results/2026-11-30-h200x2-v20/call5
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
bb() {
  rm -rf /tmp/$1 && mkdir /tmp/$1 && git ls-files -z | xargs -0 cp --parents -t /tmp/$1 && { [ -z "$2" ] || (cd /tmp/$1 && patch -p1 < $2 > /dev/null); } \
  && cmake -S /tmp/$1 -B /tmp/b$1 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null \
  && cmake --build /tmp/b$1 -j 16 --target bench_arfusion > $R/build-$1.log 2>&1; echo "$1 build rc=$?" > $R/rc-$1.txt
}
bb M "" & bb T1 $E/t1-twoshot-first-row-held.patch &
wait; ts "$(cat $R/rc-*.txt | tr '\n' ' ')"
F='(auto_fused|twoshot_fused|twoshot_allreduce|nccl_path_fused)/(16|32|64|128|256|512|2048)/'
for i in 1 2 3; do for v in M T1; do
  timeout 60 /tmp/b$v/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
done; done; ts gbench
python3 tools/gbtable.py $(for v in M T1; do for i in 1 2 3; do echo $v=$R/gb-$v-$i.json; done; done) > $R/ab.txt 2>&1
tar czf $OUT/r.tgz -C $OUT r
cat $R/times.txt; grep -E '^(auto_fused|twoshot_fused|twoshot_allreduce)/' $R/ab.txt | awk '{print $1, $2, $3, $4}'
