#!/usr/bin/env bash
# Session 7, call 1: merged-loop two-shot: tests subset, then A/B vs HEAD and steps sweep.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; tail -3 $R/build.txt
# Old tree (HEAD) for A/B, bench only.
mkdir -p /tmp/old && git archive HEAD src | tar -x -C /tmp/old && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools cmake /tmp/old/ 2>/dev/null
(cd /tmp/old && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build b -j 16 --target bench_arfusion > $R/build-old.txt 2>&1; tail -1 $R/build-old.txt)
B=build-h200
timeout 180 $B/tests/test_gpu --gtest_filter='ThreadsNccl2.EveryDtypeStrategySyncAndShape:ThreadsNccl2.SmallWorkspaceChunksLargeMessages:ThreadsNccl2.NaN*:Ranks/LocalGroup.*:Paths/Faults.*' > $R/test_gpu.txt 2>&1
echo "test_gpu rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED|OK \]" $R/test_gpu.txt | head -40
ARFUSION_EXP_TWOSHOT_STEPS=4 timeout 120 $B/tests/test_gpu --gtest_filter='ThreadsNccl2.EveryDtypeStrategySyncAndShape:ThreadsNccl2.SmallWorkspaceChunksLargeMessages:Ranks/LocalGroup.Shapes/*' > $R/test_gpu_s4.txt 2>&1
echo "test_gpu steps4 rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED" $R/test_gpu_s4.txt | head -20
F='(peer_store|nccl_path_fused|twoshot_fused|twoshot_allreduce)/(512|2048|8192)/(4096|8192)/'
for rep in 1 2; do
  /tmp/old/b/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/old-$rep.json --benchmark_out_format=json > /dev/null 2>&1
  for st in 1 2 4 8; do
    ARFUSION_EXP_TWOSHOT_STEPS=$st $B/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/new$st-$rep.json --benchmark_out_format=json > /dev/null 2>&1
  done
done
python3 exp/gbt.py old=$R/old-1.json old=$R/old-2.json s1=$R/new1-1.json s1=$R/new1-2.json s2=$R/new2-1.json s2=$R/new2-2.json s4=$R/new4-1.json s4=$R/new4-2.json s8=$R/new8-1.json s8=$R/new8-2.json | tee $R/table.txt
timeout 90 $B/tests/test_gpu_procs --gtest_filter='Processes.Shapes' > $R/procs.txt 2>&1; echo "procs rc=$?"; tail -3 $R/procs.txt
tar czf $OUT/r.tgz -C $OUT r
