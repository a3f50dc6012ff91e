#!/usr/bin/env bash
# Session 7, call 5: mover/finisher two-shot, two blocks per SM, fixed AG offset. Full GPU tests, A/B vs HEAD, trace.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
mkdir -p /tmp/old && git archive HEAD src | tar -x -C /tmp/old && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools cmake /tmp/old/
(cd /tmp/old && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release > $R/build-old.txt 2>&1 && cmake --build b -j 10 --target bench_arfusion >> $R/build-old.txt 2>&1; tail -1 $R/build-old.txt) &
bash exp/build_trace.sh build-trace > $R/build-trace.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; tail -2 $R/build.txt
wait
B=build-h200
timeout 290 ctest --test-dir $B --output-on-failure --timeout 280 -L gpu > $R/ctest.txt 2>&1
echo "ctest rc=$?"; grep -E "Test +#|tests passed|FAILED|Failure|Which is" $R/ctest.txt | head -20
F='(peer_store|nccl_path_fused|twoshot_fused|twoshot_allreduce|auto_fused)/(512|2048|8192)/(4096|8192)/'
/tmp/old/b/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/old-1.json --benchmark_out_format=json > /dev/null 2>&1
$B/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/new-1.json --benchmark_out_format=json > /dev/null 2>&1
ARFUSION_EXP_TWOSHOT_STEPS=2 $B/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/s2-1.json --benchmark_out_format=json > /dev/null 2>&1
/tmp/old/b/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/old-2.json --benchmark_out_format=json > /dev/null 2>&1
$B/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/new-2.json --benchmark_out_format=json > /dev/null 2>&1
python3 exp/gbt.py old=$R/old-1.json old=$R/old-2.json new=$R/new-1.json new=$R/new-2.json s2=$R/s2-1.json | tee $R/table.txt
for cfg in "8192 8192 1" "2048 8192 1" "512 8192 1"; do
  set -- $cfg; echo "=== tokens $1 hidden $2 norm $3"; timeout 60 build-trace/trace $1 $2 $3 2>&1
done > $R/trace.txt
grep -v "^  mark" $R/trace.txt | grep -v "rank 1" | cut -c1-500 | head -40
tar czf $OUT/r.tgz -C $OUT r
