#!/usr/bin/env bash
# Session 11, call 10: the Lamport two-shot no longer pushes sums after a wait gave up (review
# finding); the fault tests on all four wait-loop paths (the flag two-shot added back under
# FlagBarrier) including the new late-peer test, the fresh-process kernel-loading test (79
# kernels), a quick gbench of the Lamport two-shot shapes, and the process test under racecheck.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
cmake -S . -B build-t -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release > /dev/null \
  && cmake --build build-t -j 32 --target test_gpu test_gpu_procs bench_arfusion > $R/build.log 2>&1; ts build rc=$?
timeout 60 build-t/tests/test_gpu --gtest_filter='Loading.*' > $R/loading.log 2>&1; ts loading rc=$?
timeout 90 build-t/tests/test_gpu --gtest_filter='Paths/Faults.*' > $R/faults.log 2>&1; ts faults rc=$?
grep -E "^\[ +(OK|FAILED|PASSED) +\]|kernels loaded|Failure|late peer" $R/loading.log $R/faults.log | head -40
timeout 30 build-t/benchmarks/bench_arfusion --benchmark_filter='run/(twoshot_fused|twoshot_allreduce|auto_fused)/(1|16|128|256|512)/(4096|8192)/1/' > $R/gb.txt 2>&1; ts gbench rc=$?
grep -E "^run/" $R/gb.txt | awk '{print $1, $2}'
SAN="compute-sanitizer --tool racecheck --error-exitcode 9 --report-api-errors no --print-limit 20 --kernel-name-exclude kns=nccl --target-processes all"
ARFTEST_SAN_BLOCKS=8 ARFTEST_SELF_CHECK=0 ARFTEST_TIMEOUT_S=40 timeout 60 $SAN build-t/tests/test_gpu_procs --gtest_filter='Processes.SanitizeSmallShapes' > $R/racecheck.log 2>&1; ts racecheck rc=$?
grep -E "RACECHECK SUMMARY" $R/racecheck.log
tar czf $OUT/r.tgz -C $OUT r
