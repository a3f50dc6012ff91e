#!/usr/bin/env bash
# Session 7, call 4: mover/finisher two-shot. Tests (subset), A/B vs HEAD, 1 vs 2 blocks per SM, trace.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
mkdir -p /tmp/old && git archive HEAD src | tar -x -C /tmp/old && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools cmake /tmp/old/
(cd /tmp/old && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release > $R/build-old.txt 2>&1 && cmake --build b -j 10 --target bench_arfusion >> $R/build-old.txt 2>&1; tail -1 $R/build-old.txt) &
(cmake -S . -B build-ps2 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-DARFUSION_TWOSHOT_PER_SM=2 -DCMAKE_CXX_FLAGS=-DARFUSION_TWOSHOT_PER_SM=2 > $R/build-ps2.txt 2>&1 && cmake --build build-ps2 -j 10 --target bench_arfusion test_gpu >> $R/build-ps2.txt 2>&1; tail -1 $R/build-ps2.txt) &
bash exp/build_trace.sh build-trace > $R/build-trace.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; tail -2 $R/build.txt
wait
B=build-h200
T='ThreadsNccl2.EveryDtypeStrategySyncAndShape:ThreadsNccl2.SmallWorkspaceChunksLargeMessages:ThreadsNccl2.NaN*:Ranks/LocalGroup.*:Paths/Faults.*'
timeout 150 $B/tests/test_gpu --gtest_filter="$T" > $R/test_gpu.txt 2>&1
echo "test_gpu rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED|Failure" $R/test_gpu.txt | head -20
F='(peer_store|nccl_path_fused|twoshot_fused|twoshot_allreduce)/(512|2048|8192)/(4096|8192)/'
/tmp/old/b/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/old-1.json --benchmark_out_format=json > /dev/null 2>&1
$B/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/ps1-1.json --benchmark_out_format=json > /dev/null 2>&1
build-ps2/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/ps2-1.json --benchmark_out_format=json > /dev/null 2>&1
ARFUSION_EXP_TWOSHOT_STEPS=4 $B/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/ps1s4-1.json --benchmark_out_format=json > /dev/null 2>&1
python3 exp/gbt.py old=$R/old-1.json ps1=$R/ps1-1.json ps2=$R/ps2-1.json ps1s4=$R/ps1s4-1.json | tee $R/table.txt
for cfg in "8192 8192 1" "8192 8192 0" "2048 8192 1" "512 8192 1"; do
  set -- $cfg; echo "=== tokens $1 hidden $2 norm $3"; timeout 60 build-trace/trace $1 $2 $3 2>&1
done > $R/trace.txt
grep -v "^  mark" $R/trace.txt | cut -c1-600
timeout 100 build-ps2/tests/test_gpu --gtest_filter='ThreadsNccl2.EveryDtypeStrategySyncAndShape:Ranks/LocalGroup.Shapes/*' > $R/test_gpu_ps2.txt 2>&1
echo "test_gpu ps2 rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED" $R/test_gpu_ps2.txt | head -10
tar czf $OUT/r.tgz -C $OUT r
