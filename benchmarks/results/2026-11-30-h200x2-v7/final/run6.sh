#!/usr/bin/env bash
# Session 7, call 6: the landed tree (kernels as HEAD, peer_store benchmark): gbench x2, one-shot trace, GPU tests.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
bash exp/build_trace1.sh /tmp/ot > $R/build-trace1.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; tail -1 $R/build.txt
wait
B=build-h200
for i in 1 2; do $B/benchmarks/bench_arfusion --benchmark_out=$R/gbench-$i.json --benchmark_out_format=json > $R/gbench-$i.txt 2>&1; done
python3 exp/gbt.py a=$R/gbench-1.json a=$R/gbench-2.json > $R/table.txt
grep -E "peer|twoshot_allreduce/(2048|8192)/8192" $R/gbench-1.txt | cut -c1-200
timeout 60 /tmp/ot/trace1 > $R/trace-oneshot.txt 2>&1; cat $R/trace-oneshot.txt
tar czf $OUT/r.tgz -C $OUT r
timeout 230 ctest --test-dir $B --output-on-failure --timeout 220 -L gpu > $R/ctest.txt 2>&1
echo "ctest rc=$?"; grep -E "Test +#|tests passed|FAILED" $R/ctest.txt | head
tar czf $OUT/r.tgz -C $OUT r
