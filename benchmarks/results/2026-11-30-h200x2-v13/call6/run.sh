#!/usr/bin/env bash
# Session 13, call 6: (a) does racecheck model bar.sync with a thread count? (exp/rc/named.cu:
# mode 0 = two half-block groups on barriers 1 and 2, mode 1 = the same exchange on __syncthreads);
# (b) the fault tests with the fifth path (several steps per block, split); (c) racecheck of the
# process test on the landed candidate, with its hazard report kept.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
( cmake -S . -B build-h200 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build build-h200 -j 14 --target test_gpu test_gpu_procs > $R/build.log 2>&1; echo "build rc=$?" ) > $R/build.txt 2>&1 &
nvcc -arch=sm_90a -lineinfo -o /tmp/named exp/rc/named.cu && for m in 0 1; do
  compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/named $m > $R/named-racecheck-$m.log 2>&1; echo "named mode $m: rc=$? $(grep -E 'RACECHECK SUMMARY|mode' $R/named-racecheck-$m.log | tr '\n' ' ')"
  compute-sanitizer --tool synccheck --error-exitcode 9 /tmp/named $m > $R/named-synccheck-$m.log 2>&1; echo "named mode $m synccheck: rc=$? $(grep -E 'ERROR SUMMARY' $R/named-synccheck-$m.log)"
done
wait; cat $R/build.txt; ts build
ARFTEST_TIMEOUT_S=5 timeout 120 build-h200/tests/test_gpu --gtest_filter='Paths/Faults.*' > $R/faults.log 2>&1; ts "faults rc=$?"
grep -E "^\[  (FAILED|PASSED) |OK \]|Failure|late peer|mismatch reported \(tokens" $R/faults.log | head -40
tar czf $OUT/r.tgz -C $OUT r
SAN_TOOLS=racecheck SAN_WAIT_S=60 SAN_LIMIT_S=80 SAN_RACE_LIMIT_S=80 OUT=$R tools/device_check.sh sanitize 2>&1 | head -3; ts racecheck
tar czf $OUT/r.tgz -C $OUT r
