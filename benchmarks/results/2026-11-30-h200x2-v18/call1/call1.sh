#!/usr/bin/env bash
# Session 18 call 1: the Lamport one-shot with a row spread over a thread block cluster
# (Plan::row_blocks; experiment knob ARFUSION_EXP_ROW_MIN_BYTES = the smallest share of a row per
# block, 0 = off). sm_90a build, every GPU ctest entry with the knob at 1024 (the most splitting:
# cluster kernels wherever the shape allows), then benchmarks of the decode shapes at knob
# 0 / 8192 / 4096 / 2048 / 1024, 3 rounds. Logs under $OUT/r, archive $OUT/r.tgz.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
OUT=$R bash tools/device_check.sh build > $R/check-build.txt 2>&1; ts "build rc=$?"
ARFUSION_LOG=info ARFUSION_EXP_ROW_MIN_BYTES=1024 timeout 60 build-h200/benchmarks/bench_arfusion --benchmark_filter='auto_fused/1/8192/1' 2>&1 | grep -E "created|row-blocks" | head -4 > $R/created.txt
F='--benchmark_filter=(auto_fused|oneshot_allreduce|nccl_path_fused)/(1|4|16|64|128)/(4096|8192)/1'
K="0 8192 4096 2048 1024"
for i in 1 2 3; do for k in $K; do
  ARFUSION_EXP_ROW_MIN_BYTES=$k timeout 60 build-h200/benchmarks/bench_arfusion "$F" --benchmark_out=$R/gb-k$k-$i.json --benchmark_out_format=json > $R/gb-k$k-$i.txt 2>&1
done; done; ts gbench
python3 tools/gbtable.py $(for k in $K; do for i in 1 2 3; do echo k$k=$R/gb-k$k-$i.json; done; done) > $R/ab.txt 2>&1
ARFUSION_EXP_ROW_MIN_BYTES=1024 CTEST_ARGS="-L gpu" OUT=$R bash tools/device_check.sh tests > $R/check-tests.txt 2>&1; ts "tests: $(grep -E 'tests passed' $R/check-tests.txt)"
tar czf $OUT/r.tgz -C $OUT r
cat $R/created.txt $R/ab.txt
grep -h "row-blocks" $R/gb-k1024-1.txt | head -12 | cut -c1-160
tail -14 $R/check-tests.txt
