#!/usr/bin/env bash
# Session 18 call 2: as call 1, with the norm's partial sums sent by st.async and counted by an
# mbarrier instead of a cluster.sync() with release semantics (call 1: +1 us). Benchmarks at knob
# 0 / 8192 / 4096 / 2048, 3 rounds; every GPU ctest entry and compute-sanitizer (memcheck,
# racecheck, synccheck) with the knob at 1024. Logs under $OUT/r, archive $OUT/r.tgz.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
OUT=$R bash tools/device_check.sh build > $R/check-build.txt 2>&1; ts "build rc=$?"
ARFUSION_LOG=info ARFUSION_EXP_ROW_MIN_BYTES=1024 timeout 60 build-h200/benchmarks/bench_arfusion --benchmark_filter='auto_fused/1/8192/1' 2>&1 | grep -E "created|row-blocks" | head -4 > $R/created.txt
F='--benchmark_filter=(auto_fused|oneshot_allreduce|nccl_path_fused)/(1|4|16|64|128)/(4096|8192)/1'
K="0 8192 4096 2048"
for i in 1 2 3; do for k in $K; do
  ARFUSION_EXP_ROW_MIN_BYTES=$k timeout 60 build-h200/benchmarks/bench_arfusion "$F" --benchmark_out=$R/gb-k$k-$i.json --benchmark_out_format=json > $R/gb-k$k-$i.txt 2>&1
done; done; ts gbench
python3 tools/gbtable.py $(for k in $K; do for i in 1 2 3; do echo k$k=$R/gb-k$k-$i.json; done; done) > $R/ab.txt 2>&1
ARFUSION_EXP_ROW_MIN_BYTES=1024 CTEST_ARGS="-L gpu" OUT=$R bash tools/device_check.sh tests > $R/check-tests.txt 2>&1; ts "tests: $(grep -E 'tests passed' $R/check-tests.txt)"
ARFUSION_EXP_ROW_MIN_BYTES=1024 SAN_TOOLS="memcheck racecheck synccheck" OUT=$R bash tools/device_check.sh sanitize > $R/check-san.txt 2>&1; ts "sanitize: $(tr '\n' ' ' < $R/check-san.txt)"
tar czf $OUT/r.tgz -C $OUT r
cat $R/created.txt $R/ab.txt
grep -h "row-blocks" $R/gb-k2048-1.txt | head -12 | cut -c1-160
tail -14 $R/check-tests.txt; cat $R/check-san.txt
