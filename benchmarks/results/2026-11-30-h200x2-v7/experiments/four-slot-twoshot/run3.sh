#!/usr/bin/env bash
# Session 7, call 3: four-slot two-shot (RS two units ahead, own area): full GPU tests, A/B vs HEAD, steps sweep, trace.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; tail -3 $R/build.txt
mkdir -p /tmp/old && git archive HEAD src | tar -x -C /tmp/old && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools /tmp/old/ 2>/dev/null
(cd /tmp/old && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build b -j 16 --target bench_arfusion > $R/build-old.txt 2>&1; tail -1 $R/build-old.txt) &
bash exp/build_trace.sh build-trace > $R/build-trace.txt 2>&1 &
B=build-h200
timeout 280 ctest --test-dir $B --output-on-failure --timeout 250 -L gpu > $R/ctest.txt 2>&1
echo "ctest rc=$?"; grep -E "Test +#|tests passed|FAILED|Failure" $R/ctest.txt | head -20
wait
ARFUSION_EXP_TWOSHOT_STEPS=8 timeout 100 $B/tests/test_gpu --gtest_filter='ThreadsNccl2.EveryDtypeStrategySyncAndShape:ThreadsNccl2.SmallWorkspaceChunksLargeMessages:Ranks/LocalGroup.*' > $R/test_gpu_s8.txt 2>&1
echo "test_gpu steps8 rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED" $R/test_gpu_s8.txt | head -20
F='(peer_store|nccl_path_fused|twoshot_fused|twoshot_allreduce)/(512|2048|8192)/(4096|8192)/'
for rep in 1 2; do
  /tmp/old/b/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/old-$rep.json --benchmark_out_format=json > /dev/null 2>&1
  for st in 1 2 4 8; do
    ARFUSION_EXP_TWOSHOT_STEPS=$st $B/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/new$st-$rep.json --benchmark_out_format=json > /dev/null 2>&1
  done
done
python3 exp/gbt.py old=$R/old-1.json old=$R/old-2.json s1=$R/new1-1.json s1=$R/new1-2.json s2=$R/new2-1.json s2=$R/new2-2.json s4=$R/new4-1.json s4=$R/new4-2.json s8=$R/new8-1.json s8=$R/new8-2.json | tee $R/table.txt
for cfg in "8192 8192 1 1" "8192 8192 1 4" "8192 8192 0 4" "2048 8192 1 1" "2048 8192 1 4" "512 8192 1 1" "512 8192 1 2"; do
  set -- $cfg
  echo "=== tokens $1 hidden $2 norm $3 steps $4"
  ARFUSION_EXP_TWOSHOT_STEPS=$4 timeout 60 build-trace/trace $1 $2 $3 2>&1
done > $R/trace.txt
grep -v "^  mark" $R/trace.txt | grep -v "block  66" | cut -c1-700
tar czf $OUT/r.tgz -C $OUT r
