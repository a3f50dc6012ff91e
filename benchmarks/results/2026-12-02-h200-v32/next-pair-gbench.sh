#!/usr/bin/env bash
# For the next session with the H200 pair (~3 min), after ../2026-12-02-h200x2-v31/call1.sh (ctest,
# sanitizers, the fence A/B): the README's table anew on main (three full bench_arfusion runs, now
# with session 32's counters: speedup_vs_nccl, pct_peer_bw over the same-size peer store,
# pct_peer_bw_128MiB, plan labels on forced rows) and the decode step (last measured in session 6).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
B=build-h200/benchmarks
for i in 1 2 3; do
  timeout 40 $B/bench_arfusion --benchmark_out=$R/gb-main-$i.json --benchmark_out_format=json > $R/gb-main-$i.txt 2>&1
  ts "gbench $i rc=$?"
done
timeout 150 $B/arfusion-decode-bench > $R/decode.txt 2>&1; ts "decode rc=$?"
python3 tools/gbtable.py main=$R/gb-main-1.json main=$R/gb-main-2.json main=$R/gb-main-3.json > $R/table.txt 2>&1
tar czf $OUT/r.tgz -C $OUT r
grep -E "auto_fused/(1/4096|128/8192|512/8192|2048/8192|8192/8192)/|nccl_path_fused/(1/4096|128/8192|512/8192|2048/8192|8192/8192)/|twoshot_allreduce/(512|2048|8192)/8192/" $R/gb-main-1.txt
cat $R/decode.txt; cat $R/times.txt
