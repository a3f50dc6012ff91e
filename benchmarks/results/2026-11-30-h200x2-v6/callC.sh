#!/usr/bin/env bash
# Session 6, device call C: call signatures (mismatch detection) + the Lamport push barrier, vs
# HEAD + the push barrier ("oldbar"): GPU tests (incl. the mismatch test), Google Benchmark A/B
# x2 interleaved, then sanitizers on the process test (racecheck 8 blocks first).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
left() { echo $(( 575 - ($(date +%s) - T0) )); }
mkdir -p /tmp/old && cp -r CMakeLists.txt CMakePresets.json cmake include benchmarks tests tools /tmp/old/ && cp -r exp/old-src /tmp/old/src
python3 - <<'PY'
p='/tmp/old/src/kernels/oneshot.cu'
s=open(p).read()
a="    // 2+3. Wait for each peer pack, reduce in rank order, clear, epilogue."
assert a in s
open(p,'w').write(s.replace(a, "    __syncthreads();\n" + a))
PY
( cmake -S /tmp/old -B /tmp/old/build-h200 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release && cmake --build /tmp/old/build-h200 -j 8 --target bench_arfusion ) > $R/build-old.log 2>&1 &
OUT=$R tools/device_check.sh build; ts build-new
wait; ts build-old; tail -1 $R/build-old.log
timeout $(( $(left) - 170 )) ctest --test-dir build-h200 --output-on-failure --timeout 280 -L gpu > $R/ctest.log 2>&1; ts ctest rc=$?
grep -E "tests passed|Test +#|^soak|process soak|FAILED|Failure|Which is|expected" $R/ctest.log | head -30
for rep in 1 2; do
  /tmp/old/build-h200/benchmarks/bench_arfusion --benchmark_out=$R/gb-old-r$rep.json --benchmark_out_format=json > $R/gb-old-r$rep.txt 2>&1
  build-h200/benchmarks/bench_arfusion --benchmark_out=$R/gb-new-r$rep.json --benchmark_out_format=json > $R/gb-new-r$rep.txt 2>&1
done; ts gbench
python3 exp/gbtable.py old=$R/gb-old-r1.json old=$R/gb-old-r2.json new=$R/gb-new-r1.json new=$R/gb-new-r2.json > $R/ab.txt; cut -c1-330 $R/ab.txt
for tool in racecheck memcheck synccheck initcheck; do
  l=$(left); [ $l -gt 50 ] || break
  w=$(( l - 30 )); [ $w -gt 100 ] && w=100
  SAN_TOOLS=$tool SAN_WAIT_S=$w SAN_LIMIT_S=$(( w + 20 )) SAN_RACE_LIMIT_S=$(( w + 20 )) OUT=$R tools/device_check.sh sanitize 2>&1 | head -3; ts $tool
done
tar czf $OUT/r.tgz -C $OUT r
