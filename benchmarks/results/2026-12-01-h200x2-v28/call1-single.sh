#!/usr/bin/env bash
# Session 28, call 1s (one H200: the pair was not lent). Tree = 168ecf6 + tree-both.patch
# (stage-residual.patch: the flag two-shot stages its last unit's peer residual rows in shared
# memory by TMA; plus v27 lamport-defer-epilogue.patch). Correctness only: every GPU ctest entry
# (on one GPU the 2..8-rank groups run several ranks per GPU; the two-GPU tests skip). Variant BAD
# (sabotage-staged-row.patch: every staged row reads row 0's residual) must fail LocalGroup.Shapes:
# the tests reach the staged path.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; V=benchmarks/results/2026-12-01-h200x2-v28
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
VARIANTS="BAD=$V/sabotage-staged-row.patch" VARIANT_TARGETS=test_gpu OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
CTEST_ARGS="-L gpu" timeout 300 env OUT=$R bash tools/device_check.sh tests > $R/tests.txt 2>&1; ts "ctest"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
timeout 120 /tmp/arf-BAD/build/tests/test_gpu --gtest_filter='Ranks/LocalGroup.Shapes/*' > $R/bad.txt 2>&1; ts "BAD rc=$?"
grep -E '^\[  (SKIPPED|PASSED|FAILED) ' $R/ctest.log | sort | uniq -c | head; grep -cE '^\[       OK \]' $R/ctest.log
grep -E 'FAILED|mismatch|Failure' $R/bad.txt | head -8
tar czf $OUT/r.tgz -C $OUT r
tail -8 $R/tests.txt; cat $R/times.txt
