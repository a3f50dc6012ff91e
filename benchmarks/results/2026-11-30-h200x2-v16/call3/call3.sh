#!/usr/bin/env bash
# Session 16 call 3: main as landed (kernels unchanged since session 15): full sm_90a build, every
# GPU ctest entry, two benchmark runs (the closing table), logs under $OUT/r, archive $OUT/r.tgz.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
git log --oneline -1 > $R/commit.txt 2>&1
OUT=$R bash tools/device_check.sh build tests > $R/check.txt 2>&1; ts "device_check build tests rc=$?"
for i in 1 2; do
  timeout 60 build-h200/benchmarks/bench_arfusion --benchmark_out=$R/gb-main-$i.json --benchmark_out_format=json > $R/gb-main-$i.txt 2>&1
done; ts gbench
python3 tools/gbtable.py main=$R/gb-main-1.json main=$R/gb-main-2.json > $R/table.txt 2>&1
tar czf $OUT/r.tgz -C $OUT r
tail -12 $R/check.txt
grep -E '^(nccl_path_fused|auto_fused|twoshot_allreduce|oneshot_allreduce|peer_store)/' $R/table.txt
