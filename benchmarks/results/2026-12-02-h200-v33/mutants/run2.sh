#!/usr/bin/env bash
# Session 33, second round (run.sh's method): three mutants of the sync machinery. M6: no
# grid-dependency wait (the broken PDL path the creation-time self-check exists to catch, on real
# hardware instead of an injected fault); M7: waits that never time out (only abort releases
# them); M8: no call-signature checks. Each runs under the test meant to catch it, main as control.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 ARFTEST_TIMEOUT_S=1 ARFTEST_DEADLINE_S=30
M=benchmarks/results/2026-12-02-h200-v33/mutants
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
export VARIANTS="M6=$M/M6-no-grid-dependency-wait.patch M7=$M/M7-waits-never-time-out.patch M8=$M/M8-no-signature-check.patch"
export VARIANT_TARGETS=test_gpu
OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "main build: $(tail -1 $R/build.txt)"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
declare -A F=(
  [M6]='Injected/SelfCheck.OneRanksFailureMovesEveryRankToFlagBarrier/None'
  [M7]='Paths/Faults.APeerThatSkipsACallTimesOut/0'
  [M8]='Paths/Faults.RanksPairingDifferentCallsFailWithMismatch/0:Paths/Faults.RanksPairingDifferentCallsFailWithMismatch/1')
for m in M6 M7 M8; do
  ARFUSION_LOG=info timeout 60 build-h200/tests/test_gpu --gtest_filter="${F[$m]}" > $R/main-$m.txt 2>&1; mrc=$?
  ARFUSION_LOG=info timeout 60 /tmp/arf-$m/build/tests/test_gpu --gtest_filter="${F[$m]}" > $R/$m.txt 2>&1; rc=$?
  verdict=SURVIVED; [ $rc -ne 0 ] && verdict=CAUGHT
  ts "$m (${F[$m]}): main rc=$mrc, mutant rc=$rc: $verdict; $(grep -m1 -E 'self-check:|deadline|expected|Failure' $R/$m.txt | cut -c1-220)"
done
tar czf $OUT/r.tgz -C $OUT r
cat $R/times.txt
