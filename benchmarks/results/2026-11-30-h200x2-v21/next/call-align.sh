#!/usr/bin/env bash
# For the next session with device time (prepared in session 21, not run): bench only, main
# against ALN = main + region-align-128.patch (both areas' regions rounded to 128 bytes; CPU tests
# pass with it). 3 gbench runs of every shape, and the default sweep of each. ~4 minutes plus the
# start. If ALN wins, land the patch, then run build + tests + the four sanitizers on it.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v21/next
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
export VARIANTS="M= ALN=$E/region-align-128.patch"
OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
AB_RUNS=3 AB_FILTER='(auto_fused|oneshot_allreduce|twoshot_allreduce|nccl_path_fused|peer_store)/' OUT=$R bash tools/device_check.sh ab; ts ab
for v in M ALN; do timeout 40 /tmp/arf-$v/build/benchmarks/arfusion-bench --out $R/sweep-$v > $R/sweep-$v.txt 2>&1; ts "sweep $v rc=$?"; done
tar czf $OUT/r.tgz -C $OUT r
grep -E "^(auto_fused|twoshot_allreduce)" $R/ab.txt; cat $R/times.txt
