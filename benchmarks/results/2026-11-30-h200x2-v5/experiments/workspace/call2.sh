#!/usr/bin/env bash
# Session 5, device call 2: Lamport area capped at 32 MiB (data area takes the rest), gamma of the
# first vector early; workspace 64/128/256 MiB; process tests; compute-sanitizer on processes.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
main() {
  OUT=$R tools/device_check.sh build; ts build
  gb() { build-h200/benchmarks/bench_arfusion --benchmark_out=$R/$1.json --benchmark_out_format=json ${2:-} > $R/$1.txt 2>&1; }
  gb ws64
  F="--benchmark_filter=run/(oneshot_fused|twoshot_fused|auto_fused|twoshot_allreduce|oneshot_allreduce)/(1|128|512|2048|8192)/(4096|8192)/1/"
  for ws in 128 256 64; do ARFUSION_WORKSPACE_MB=$ws gb ws$ws-f "$F"; done; ts gbench
  build-h200/tests/test_gpu_procs > $R/procs.log 2>&1; echo "procs rc=$?"; ts procs
  grep -E "OK|FAILED|soak" $R/procs.log | head -12
  SAN_WAIT_S=50 SAN_LIMIT_S=58 OUT=$R tools/device_check.sh sanitize; ts sanitize
}
export -f main ts; export R T0
timeout 570 bash -c main
tar czf $OUT/r.tgz -C $OUT r
