#!/usr/bin/env bash
# Session 8, call 3: the candidate tree (v3: wait slow path out of line, 32-bit push index):
# per-warp trace of the one-shot, full gbench x2, GPU tests.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
bash exp/tr2/build.sh /tmp/tr2 > $R/build-trace2.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; tail -1 $R/build.txt
wait; tail -1 $R/build-trace2.txt
timeout 60 /tmp/tr2/trace2 > $R/trace2.txt 2>&1; cat $R/trace2.txt
B=build-h200
for i in 1 2; do $B/benchmarks/bench_arfusion --benchmark_out=$R/gbench-$i.json --benchmark_out_format=json > $R/gbench-$i.txt 2>&1; done
python3 exp/gbtable.py a=$R/gbench-1.json a=$R/gbench-2.json > $R/table.txt
tar czf $OUT/r.tgz -C $OUT r
timeout 240 ctest --test-dir $B --output-on-failure --timeout 230 -L gpu > $R/ctest.txt 2>&1
echo "ctest rc=$?"; grep -E "tests passed|FAILED|Failed" $R/ctest.txt | head
tar czf $OUT/r.tgz -C $OUT r
