#!/usr/bin/env bash
# Session 22, call 1 (one H200: the pair was withheld). Build; every GPU ctest entry that one GPU
# runs (the 2-rank NCCL and process tests skip); then OLD = this tree with the flag-window fix
# reversed (flag-window.patch), to show that the new StaleFlags and epoch-wrap tests fail there.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200-v22
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
VARIANTS="OLD=$E/flag-window.patch:R" VARIANT_TARGETS=test_gpu OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
CTEST_ARGS="-L gpu" OUT=$R bash tools/device_check.sh tests > $R/tests.txt 2>&1; ts "tests"
timeout 150 build-h200/tests/test_gpu --gtest_filter='FlagKernels/StaleFlags.*:Ranks/LocalGroup.CallsAcross*' > $R/new-tests.txt 2>&1; ts "main new tests rc=$?"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
ARFTEST_TIMEOUT_S=20 timeout 120 /tmp/arf-OLD/build/tests/test_gpu --gtest_filter='FlagKernels/StaleFlags.*:Ranks/LocalGroup.CallsAcross*' > $R/old-tests.txt 2>&1; ts "OLD new tests rc=$?"
grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|expected|flags 3|mismatch|differs|rank [0-9]:" $R/old-tests.txt | head -30
grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|flags 3" $R/new-tests.txt | head -30
tar czf $OUT/r.tgz -C $OUT r
cat $R/tests.txt | tail -30; cat $R/times.txt
