#!/usr/bin/env bash
# Session 20 call 1: the tree to land (main abcc9aa + the Lamport one-shot's held operands, session
# 19's V6). Full sm_90a build, every GPU ctest entry, compute-sanitizer memcheck, racecheck,
# synccheck and initcheck, then a same-call A/B of 3 gbench runs against abcc9aa (bench only), with
# VB (bench only: abcc9aa + held operands in the one-block kernel too, input only, 16 B spill at
# bf16 kVpt 2), and the main job's default sweep. Logs under $OUT/r, archive $OUT/r.tgz.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=$PWD/benchmarks/results/2026-11-30-h200x2-v20/call1
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
git rev-parse HEAD > $R/commit.txt; git status --short >> $R/commit.txt
bb() {  # name, patch or empty: abcc9aa (+ patch), bench only
  rm -rf /tmp/$1 && mkdir /tmp/$1 && git archive abcc9aa | tar x -C /tmp/$1 && { [ -z "$2" ] || (cd /tmp/$1 && patch -p1 < $2 > /dev/null); } \
  && cmake -S /tmp/$1 -B /tmp/b$1 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null \
  && cmake --build /tmp/b$1 -j 5 --target bench_arfusion > $R/build-$1.log 2>&1; echo "$1 build rc=$?" > $R/rc-$1.txt
}
bb base "" & bb VB $E/vb-nocluster-hold-input.patch &
OUT=$R bash tools/device_check.sh build > $R/check-build.txt 2>&1; ts "build rc=$?"
CTEST_ARGS="-L gpu" OUT=$R bash tools/device_check.sh tests > $R/check-tests.txt 2>&1; ts "tests: $(grep -E 'tests passed' $R/check-tests.txt)"
wait; ts "$(cat $R/rc-*.txt | tr '\n' ' ')"
tar czf $OUT/r.tgz -C $OUT r
SAN_TOOLS="memcheck racecheck synccheck initcheck" OUT=$R bash tools/device_check.sh sanitize > $R/check-san.txt 2>&1; ts "sanitize done"
tar czf $OUT/r.tgz -C $OUT r
F='(auto_fused|oneshot_fused|oneshot_allreduce|nccl_path_fused)/'
for i in 1 2 3; do
  timeout 60 /tmp/bbase/benchmarks/bench_arfusion --benchmark_out=$R/gb-base-$i.json --benchmark_out_format=json > $R/gb-base-$i.txt 2>&1
  timeout 60 build-h200/benchmarks/bench_arfusion --benchmark_out=$R/gb-main-$i.json --benchmark_out_format=json > $R/gb-main-$i.txt 2>&1
  timeout 60 /tmp/bVB/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-VB-$i.json --benchmark_out_format=json > $R/gb-VB-$i.txt 2>&1
done; ts gbench
python3 tools/gbtable.py $(for v in base main VB; do for i in 1 2 3; do echo $v=$R/gb-$v-$i.json; done; done) > $R/ab.txt 2>&1
timeout 60 build-h200/benchmarks/arfusion-bench --out $R/sweep > $R/sweep.txt 2>&1; ts "sweep rc=$?"
tar czf $OUT/r.tgz -C $OUT r
cat $R/times.txt; tail -6 $R/check-tests.txt; grep -E "^(soak|process soak|timeout|peer skips|split fault)" $R/ctest.log | head; cat $R/check-san.txt
grep -E '^(nccl_path_fused|auto_fused|oneshot_fused|oneshot_allreduce)/(1|2|4|8|16|32|64|128)/(4096|8192)/' $R/ab.txt | awk '{print $1, $2, $3, $4, $5}'
tail -3 $R/sweep.txt
