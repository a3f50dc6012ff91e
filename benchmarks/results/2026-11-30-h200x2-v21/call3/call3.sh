#!/usr/bin/env bash
# Session 21 call 3 (call 2 re-ran call 1's A/B with a filter that matched): bench only, L2
# prefetches of the two-shots' residuals. V1 = the flag two-shot asks L2 for the peers' rows'
# residuals of a block's last unit when the unit starts (before its reduce-scatter wait); V1b = the
# same for every unit; V3 = the Lamport two-shot asks L2 for its unit's residuals and own-input
# rows before its push. M = main.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v21/call3
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpus.txt 2>&1
export VARIANTS="M= V1=$E/v1-last-unit-residual-prefetch.patch V1b=$E/v1b-every-unit-residual-prefetch.patch V3=$E/v3-lamport-twoshot-prefetch-before-push.patch"
OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
AB_RUNS=3 AB_FILTER='((auto_fused|nccl_path_fused)/(256|512|2048|8192)/(4096|8192)/1|twoshot_allreduce/(2048|8192)/8192/1|peer_store)' \
  OUT=$R bash tools/device_check.sh ab; ts ab
tar czf $OUT/r.tgz -C $OUT r
cat $R/ab.txt; cat $R/times.txt
