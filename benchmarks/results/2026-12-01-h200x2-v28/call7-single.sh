#!/usr/bin/env bash
# Session 28, call 7s (one H200: the pair was not lent). Tree = ab2c334 + two-role.patch (the flag
# two-shot in two roles, pushers and finishers, when ARFUSION_TWO_SHOT_FINISHERS is set; a probe).
# Correctness only: every GPU ctest entry with ARFUSION_TWO_SHOT_FINISHERS=16 (on one GPU the
# 2..8-rank groups run several ranks per GPU, a quarter of their blocks finishers; the two-GPU
# tests skip), then without it. Variant BAD (sabotage-two-role.patch: every finisher row reads row
# 0's sums) must fail LocalGroup.Shapes with the variable set: the tests reach the finishers.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; V=benchmarks/results/2026-12-01-h200x2-v28
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
VARIANTS="BAD=$V/sabotage-two-role.patch" VARIANT_TARGETS=test_gpu OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
mkdir -p $R/on $R/off
ARFUSION_TWO_SHOT_FINISHERS=16 CTEST_ARGS="-L gpu" timeout 200 env OUT=$R/on bash tools/device_check.sh tests > $R/tests-on.txt 2>&1; ts "ctest with finishers"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
ARFUSION_TWO_SHOT_FINISHERS=16 timeout 60 /tmp/arf-BAD/build/tests/test_gpu --gtest_filter='Ranks/LocalGroup.Shapes/*' > $R/bad.txt 2>&1; ts "BAD rc=$?"
CTEST_ARGS="-L gpu" timeout 120 env OUT=$R/off bash tools/device_check.sh tests > $R/tests-off.txt 2>&1; ts "ctest without"
grep -E 'FAILED|Failure' $R/on/ctest.log | head; grep -cE '^\[       OK \]' $R/on/ctest.log
grep -E 'FAILED|Failure' $R/bad.txt | head -5
grep -E 'FAILED|Failure' $R/off/ctest.log | head -5
tar czf $OUT/r.tgz -C $OUT r
tail -4 $R/tests-on.txt; tail -4 $R/tests-off.txt; cat $R/times.txt
