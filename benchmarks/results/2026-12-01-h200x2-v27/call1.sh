#!/usr/bin/env bash
# Session 27, call 1 (H200 pair). Tree = 9835478 + the flag two-shot's last unit streamed
# (stream-last-unit.patch: warps 0-7 reduce the owned rows and signal each row's all-gather with a
# row count, phase 2; warps 8-15 finish the peers' rows as their counts arrive). OLD = 9835478
# (patch reversed), bench only. Every GPU ctest entry on the tree while OLD builds; a gbench A/B of
# the two-shot shapes (3 rounds, peer_store in each for pct_peer_bw).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-12-01-h200x2-v27
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
export VARIANTS="OLD=$E/stream-last-unit.patch:R"
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
CTEST_ARGS="-L gpu" timeout 280 env OUT=$R bash tools/device_check.sh tests > $R/tests.txt 2>&1; ts "ctest"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
export AB_FILTER='^run/((auto_fused|twoshot_fused|twoshot_allreduce|nccl_path_fused)/(512|2048|8192)/(4096|8192)/1/|peer_store/8192/)'
AB_RUNS=3 OUT=$R timeout 150 bash tools/device_check.sh ab > /dev/null 2>&1; ts ab
tar czf $OUT/r.tgz -C $OUT r
tail -8 $R/tests.txt
grep -E '^(auto_fused|twoshot_fused|twoshot_allreduce|nccl_path_fused|peer_store)/' $R/ab.txt; cat $R/times.txt
