#!/usr/bin/env bash
# Session 22, call 3 (H200 pair, lent again after calls 1-2 on one GPU). Build main and OLD (this
# tree with the flag-window fix reversed: flag-window.patch) in parallel; every GPU ctest entry on
# main; the new StaleFlags and epoch-wrap tests on OLD (they must fail there); a gbench A/B of OLD
# against main over the flag two-shot sizes and Auto (the fix changes the flag kernels' waits).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200-v22
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
export VARIANTS="OLD=$E/flag-window.patch:R"
VARIANT_TARGETS="test_gpu bench_arfusion" OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
timeout 100 build-h200/tests/test_gpu --gtest_filter='FlagKernels/StaleFlags.*:Ranks/LocalGroup.CallsAcross*' > $R/new-tests.txt 2>&1; ts "main new tests rc=$?"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
ARFTEST_TIMEOUT_S=5 timeout 60 /tmp/arf-OLD/build/tests/test_gpu --gtest_filter='FlagKernels/StaleFlags.*:Ranks/LocalGroup.CallsAcross*/0' > $R/old-tests.txt 2>&1; ts "OLD new tests rc=$?"
CTEST_ARGS="-L gpu" timeout 330 env OUT=$R bash tools/device_check.sh tests > $R/tests.txt 2>&1; ts "ctest"
AB_RUNS=2 AB_FILTER='(auto_fused|twoshot_fused|oneshot_flag_fused|twoshot_allreduce|nccl_path_fused)/' OUT=$R timeout 100 bash tools/device_check.sh ab > /dev/null 2>&1; ts ab
tar czf $OUT/r.tgz -C $OUT r
grep -E "^\[ +(OK|FAILED) +\]|flags 3" $R/new-tests.txt | head -12
grep -E "^\[ +(OK|FAILED) +\]|expected|rank [0-9]" $R/old-tests.txt | head -12
cat $R/tests.txt | tail -14; head -40 $R/ab.txt; cat $R/times.txt
