#!/usr/bin/env bash
# Session 13, call 7: the split with non-.aligned group barriers (barrier.sync / barrier.red):
# racecheck + synccheck of the process test, fault tests, shapes and rank-count tests, bench of the
# split shapes.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
cmake -S . -B build-h200 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build build-h200 -j 16 --target test_gpu test_gpu_procs bench_arfusion > $R/build.log 2>&1; ts "build rc=$?"
SAN_TOOLS=racecheck SAN_WAIT_S=40 SAN_LIMIT_S=60 SAN_RACE_LIMIT_S=60 OUT=$R tools/device_check.sh sanitize 2>&1 | head -1; ts racecheck
tar czf $OUT/r.tgz -C $OUT r
ARFTEST_TIMEOUT_S=5 timeout 150 build-h200/tests/test_gpu --gtest_filter='Paths/Faults.*:ThreadsNccl2.EveryDtypeStrategySyncAndShape:ThreadsNccl2.SmallWorkspaceChunksLargeMessages:Ranks/LocalGroup.*' > $R/tests.log 2>&1; ts "tests rc=$?"
grep -E "^\[  (FAILED|PASSED) |Failure|soak at" $R/tests.log | head -20
tar czf $OUT/r.tgz -C $OUT r
timeout 30 build-h200/benchmarks/bench_arfusion --benchmark_filter='run/(twoshot_fused|twoshot_allreduce)/(2048|8192)/(4096|8192)/1/' > $R/bench.txt 2>&1; ts bench
grep -E "^run" $R/bench.txt | awk '{print $1, $2}'
SAN_TOOLS=synccheck SAN_WAIT_S=30 SAN_LIMIT_S=45 OUT=$R tools/device_check.sh sanitize 2>&1 | head -1; ts synccheck
tar czf $OUT/r.tgz -C $OUT r
