#!/usr/bin/env bash
# Session 6, device call A: candidate (gather epilogue, residual loads first, one-barrier norm,
# barrier after the Lamport push) vs HEAD: GPU tests (full, incl. the new Processes.Shapes),
# Google Benchmark A/B x2 interleaved, then racecheck on processes with what time is left.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
left() { echo $(( 570 - ($(date +%s) - T0) )); }
# old tree
mkdir -p /tmp/old && cp -r CMakeLists.txt CMakePresets.json cmake include benchmarks tests tools /tmp/old/ && cp -r exp/old-src /tmp/old/src
( cmake -S /tmp/old -B /tmp/old/build-h200 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release && cmake --build /tmp/old/build-h200 -j 8 --target bench_arfusion ) > $R/build-old.log 2>&1 &
OUT=$R tools/device_check.sh build; ts build-new
wait; ts build-old; tail -2 $R/build-old.log
timeout $(( $(left) - 200 )) ctest --test-dir build-h200 --output-on-failure --timeout 280 -L gpu > $R/ctest.log 2>&1; ts ctest rc=$?
grep -E "tests passed|Test +#|^soak|process soak|FAILED|Failure|Which is" $R/ctest.log | head -30
for rep in 1 2; do
  /tmp/old/build-h200/benchmarks/bench_arfusion --benchmark_out=$R/gb-old-r$rep.json --benchmark_out_format=json > $R/gb-old-r$rep.txt 2>&1
  build-h200/benchmarks/bench_arfusion --benchmark_out=$R/gb-new-r$rep.json --benchmark_out_format=json > $R/gb-new-r$rep.txt 2>&1
done; ts gbench
python3 exp/gbtable.py old=$R/gb-old-r1.json old=$R/gb-old-r2.json new=$R/gb-new-r1.json new=$R/gb-new-r2.json > $R/ab.txt; cat $R/ab.txt | cut -c1-400
l=$(left); if [ $l -gt 60 ]; then
  SAN_TOOLS=racecheck SAN_RACE_BLOCKS=1 SAN_WAIT_S=$(( l - 40 )) SAN_RACE_LIMIT_S=$(( l - 20 )) OUT=$R tools/device_check.sh sanitize 2>&1 | head -3; ts racecheck-1block
fi
tar czf $OUT/r.tgz -C $OUT r
