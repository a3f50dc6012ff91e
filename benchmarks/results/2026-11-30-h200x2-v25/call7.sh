#!/usr/bin/env bash
# Session 25, call 7 (H200 pair), bench only. The Lamport one-shot compiled for two ranks
# (world2.patch: a kWorld template parameter; rank loops of two, launched when the communicator has
# two ranks) against main (OLD = the patch reversed). gbench A/B OLD / W2, 3 rounds; bf16 sweeps up
# to 1 MiB at hidden 2048, 4096, 8192 (Auto), twice per label.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v25
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpus.txt 2>&1
export VARIANTS="OLD=$E/world2.patch:R W2="
OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
AB_RUNS=3 AB_FILTER='^run/((auto_fused|oneshot_allreduce)/(1|4|8|16|32|64|128)/(4096|8192)|auto_fused/(256|512|2048)/8192|nccl_path_fused/(1/4096|128/8192))/1/' \
  OUT=$R timeout 200 bash tools/device_check.sh ab > /dev/null 2>&1; ts ab
for i in 1 2; do for l in OLD W2; do
  timeout 60 /tmp/arf-$l/build/benchmarks/arfusion-bench --max-bytes 1048576 --dtypes bf16 --hidden 2048,4096,8192 --out $R/sweep-$l-$i > $R/sweep-$l-$i.txt 2>&1
done; done; ts sweeps
tar czf $OUT/r.tgz -C $OUT r
cat $R/ab.txt; cat $R/times.txt
