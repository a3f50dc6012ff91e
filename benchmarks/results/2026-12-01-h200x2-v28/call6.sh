#!/usr/bin/env bash
# Session 28, call 6 (H200 pair). Tree = ae9e623 + lamport-prefetch-unit.patch (the Lamport
# two-shot asks L2 for its unit's residual rows and owned input rows at the start, not one row
# ahead only). Bench-only OLD = ae9e623 (patch reversed). Every GPU ctest entry and the four
# sanitizers on the tree after a gbench A/B, 3 rounds, of the shapes the Lamport
# two-shot takes (256-512 rows) and a few others.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; V=benchmarks/results/2026-12-01-h200x2-v28
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
export VARIANTS="OLD=$V/lamport-prefetch-unit.patch:R"
OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
export AB_FILTER='^run/((auto_fused|twoshot_fused|twoshot_allreduce|nccl_path_fused)/(128|256|512|2048)/(4096|8192)/1/|peer_store/512/)'
AB_RUNS=3 OUT=$R timeout 90 bash tools/device_check.sh ab > /dev/null 2>&1; ts ab
grep -E '^(auto_fused|twoshot_fused|twoshot_allreduce|peer_store)/' $R/ab.txt
CTEST_ARGS="-L gpu" timeout 230 env OUT=$R bash tools/device_check.sh tests > $R/tests.txt 2>&1; ts "ctest"
OUT=$R timeout 170 bash tools/device_check.sh sanitize > $R/sanitize.txt 2>&1; ts "sanitize"
tar czf $OUT/r.tgz -C $OUT r
tail -6 $R/tests.txt; cat $R/sanitize.txt
cat $R/times.txt
