#!/usr/bin/env bash
# Session 21 call 5: main + the Lamport polls' fixed 32-cycle pause (poll-pause.patch; call 4's B32):
# full build, every GPU ctest entry, 3 gbench runs against base (the patch reversed), the four
# sanitizers, then the default sweep of main and of base.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v21/call5
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
git status --short > $R/tree.txt 2>&1
OUT=$R bash tools/device_check.sh build > $R/build-stage.txt 2>&1; ts "build: $(tail -1 $R/build-stage.txt)"
export VARIANTS="base=$E/poll-pause.patch:R"
OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
CTEST_ARGS="-L gpu" OUT=$R bash tools/device_check.sh tests > $R/tests.txt 2>&1; ts "tests: $(grep -E 'tests passed' $R/tests.txt)"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
AB_RUNS=3 AB_FILTER='(auto_fused|oneshot_allreduce|twoshot_fused)/(1|4|8|16|32|64|128|256|512)/(4096|8192)/|nccl_path_fused/(1|32|128|512)/' \
  OUT=$R bash tools/device_check.sh ab; ts ab
tar czf $OUT/r.tgz -C $OUT r
SAN_TOOLS="memcheck racecheck synccheck initcheck" OUT=$R bash tools/device_check.sh sanitize > $R/sanitize.txt 2>&1; ts sanitize
tar czf $OUT/r.tgz -C $OUT r
timeout 40 build-h200/benchmarks/arfusion-bench --out $R/sweep-main > $R/sweep-main.txt 2>&1; ts "sweep main rc=$?"
timeout 40 /tmp/arf-base/build/benchmarks/arfusion-bench --out $R/sweep-base > $R/sweep-base.txt 2>&1; ts "sweep base rc=$?"
tar czf $OUT/r.tgz -C $OUT r
tail -8 $R/tests.txt; cat $R/sanitize.txt; grep -E "^(auto_fused|oneshot_allreduce)" $R/ab.txt; cat $R/times.txt
