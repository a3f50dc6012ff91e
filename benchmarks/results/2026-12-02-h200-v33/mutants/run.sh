#!/usr/bin/env bash
# Session 33: do the GPU tests catch broken kernels? Five mutants of main (this folder's patches),
# each built as a variant (test_gpu only) and run under the tests meant to catch its kind of bug,
# with main under the same filters as the control. CAUGHT: the filter failed (as it must);
# SURVIVED: it passed, i.e. a test that could not see that bug.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 ARFTEST_TIMEOUT_S=1
M=benchmarks/results/2026-12-02-h200-v33/mutants
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
export VARIANTS="M1=$M/M1-no-eps.patch M2=$M/M2-order-by-sm.patch M3=$M/M3-no-sanitize.patch M4=$M/M4-at-or-after.patch M5=$M/M5-last-vector-unwritten.patch"
export VARIANT_TARGETS=test_gpu
OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "main build: $(tail -1 $R/build.txt)"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
declare -A F=(
  [M1]='Ranks/LocalGroup.Shapes/0:AddRMSNorm.*'
  [M2]='Ranks/LocalGroup.Shapes/1:Ranks/LocalGroup.SoakOneShotAgainstTwoShot/1'
  [M3]='Ranks/LocalGroup.NaNInfNegZeroAndSentinelInputs/0'
  [M4]='FlagKernels/StaleFlags.*'
  [M5]='Ranks/LocalGroup.Shapes/0:AddRMSNorm.*')
for m in M1 M2 M3 M4 M5; do
  timeout 90 build-h200/tests/test_gpu --gtest_filter="${F[$m]}" > $R/main-$m.txt 2>&1; mrc=$?
  timeout 90 /tmp/arf-$m/build/tests/test_gpu --gtest_filter="${F[$m]}" > $R/$m.txt 2>&1; rc=$?
  verdict=SURVIVED; [ $rc -ne 0 ] && verdict=CAUGHT
  ts "$m (${F[$m]}): main rc=$mrc, mutant rc=$rc: $verdict; first failure: $(grep -m1 -E 'Failure|error|differ|mismatch|timeout|Expected' $R/$m.txt | cut -c1-200)"
done
tar czf $OUT/r.tgz -C $OUT r
cat $R/times.txt
