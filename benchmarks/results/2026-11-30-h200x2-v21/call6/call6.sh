#!/usr/bin/env bash
# Session 21 call 6 (bench only): the Lamport poll back-off's cap, 512 cycles (M = main) against
# 128 / 64 / 32 (B128 / B64 / B32), 3 runs of the one-shot's shapes (call 5: B32 gained at 4096-wide
# rows and lost at 8192-wide rows over 4-block clusters), and the default sweep of M and B128.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v21
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
export VARIANTS="M= B128=$E/call4/poll-backoff-b128.patch B64=$E/call6/poll-backoff-b64.patch B32=$E/call4/poll-backoff-b32.patch"
OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
AB_RUNS=3 AB_FILTER='(auto_fused|oneshot_allreduce)/(1|4|8|16|32|64|128)/(4096|8192)/' OUT=$R bash tools/device_check.sh ab; ts ab
for v in M B128; do timeout 40 /tmp/arf-$v/build/benchmarks/arfusion-bench --out $R/sweep-$v > $R/sweep-$v.txt 2>&1; ts "sweep $v rc=$?"; done
tar czf $OUT/r.tgz -C $OUT r
grep -E "^auto_fused" $R/ab.txt; cat $R/times.txt
