#!/usr/bin/env bash
# Session 17 call 1: the two-shot's smaller last wave (StepRows::last). One experiment build
# (-DARFUSION_EXPERIMENTS: plan.cpp reads ARF_EXP_LAST_PCT, the last wave's rows in percent of R,
# and ARF_EXP_LAST_ONE=1, which also cuts one-step calls into two), 3 rounds of 6 variants; then
# the GPU tests with every multi-step two-shot of narrow rows on a last wave of 25%.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
nvidia-smi topo -m > $R/gpus.txt 2>&1
cmake -S . -B /tmp/be -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS=-DARFUSION_EXPERIMENTS > /dev/null \
  && cmake --build /tmp/be -j 16 > $R/build.log 2>&1; ts "build rc=$?"
F='--benchmark_filter=(auto_fused|twoshot_allreduce)/(2048|8192)/(4096|8192)/|peer_store/(2048|8192)/'
V="p100:100:0 p62:62:0 p40:40:0 p25:25:0 o25:25:1 o50:50:1"
for i in 1 2 3; do for v in $V; do IFS=: read name pct one <<< "$v"
  ARF_EXP_LAST_PCT=$pct ARF_EXP_LAST_ONE=$one timeout 60 /tmp/be/benchmarks/bench_arfusion "$F" \
    --benchmark_out=$R/gb-$name-$i.json --benchmark_out_format=json > $R/gb-$name-$i.txt 2>&1
done; done; ts gbench
python3 tools/gbtable.py $(for v in $V; do for i in 1 2 3; do echo ${v%%:*}=$R/gb-${v%%:*}-$i.json; done; done) > $R/ab.txt 2>&1
grep -h -o 'auto_fused/[0-9]*/[0-9]*/[0-9]*/[^"]*"[^"]*' $R/gb-*-1.txt > /dev/null 2>&1
for v in $V; do echo "== ${v%%:*}"; grep -E '^run/auto_fused' $R/gb-${v%%:*}-1.txt | awk '{print $1, $NF, $(NF-1), $(NF-2), $(NF-3), $(NF-4)}'; done > $R/labels.txt
ARF_EXP_LAST_PCT=25 timeout 200 /tmp/be/tests/test_gpu > $R/test-p25.log 2>&1; ts "test_gpu last 25% rc=$?"
ARF_EXP_LAST_PCT=25 timeout 100 /tmp/be/tests/test_gpu_procs > $R/test-procs-p25.log 2>&1; ts "test_gpu_procs last 25% rc=$?"
ARF_EXP_LAST_PCT=50 ARF_EXP_LAST_ONE=1 timeout 150 /tmp/be/tests/test_gpu > $R/test-o50.log 2>&1; ts "test_gpu last 50% one-step cut rc=$?"
tar czf $OUT/r.tgz -C $OUT r
cat $R/ab.txt; cat $R/labels.txt | head -40
grep -E "FAILED|PASSED" $R/test-*.log | head -30
