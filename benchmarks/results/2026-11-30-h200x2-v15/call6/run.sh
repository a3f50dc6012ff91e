#!/usr/bin/env bash
# Session 15 call 6 (diagnostics, not for landing): what the Lamport one-shot's call-header check
# (nohdr: no header exchange) and the trigger's position (trigger0: trigger right after the grid-
# dependency wait, against the contract) are worth at decode sizes. 3 rounds each against main.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
X=$PWD/exp  # (the patches are in this folder); R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
mk() {
  local v=$1 p=${2:-}
  rm -rf /tmp/$v && mkdir /tmp/$v && git archive HEAD | tar x -C /tmp/$v && { [ -z "$p" ] || (cd /tmp/$v && git apply $X/$p); } \
    && (cd /tmp/$v && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null \
        && cmake --build b -j 10 --target bench_arfusion > $R/build-$v.log 2>&1); echo "build $v rc=$?"
}
mk main > $R/mk-main.txt 2>&1 &
mk nohdr diag-nohdr.patch > $R/mk-nohdr.txt 2>&1 &
mk trigger0 diag-trigger0.patch > $R/mk-trigger0.txt 2>&1 &
wait; ts "builds: $(cat $R/mk-*.txt | tr '\n' ' ')"
F='(oneshot_fused|auto_fused|oneshot_allreduce)/(1|4|16|64|128)/'
for i in 1 2 3; do for v in main nohdr trigger0; do
  timeout 30 /tmp/$v/b/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
done; done; ts gbench
tar czf $OUT/r.tgz -C $OUT r
