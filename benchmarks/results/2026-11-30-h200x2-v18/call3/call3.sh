#!/usr/bin/env bash
# Session 18 call 3: main with the one-shot's rows over clusters (Plan::row_blocks, the final rule,
# no knob): full sm_90a build, every GPU ctest entry, a same-call A/B of 3 benchmark runs against
# 57ab968 (session 17's main, bench only), compute-sanitizer memcheck, racecheck and synccheck
# (the process test now has a case on the cluster kernel). Logs under $OUT/r, archive $OUT/r.tgz.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
( rm -rf /tmp/v && mkdir /tmp/v && git archive 57ab968 | tar x -C /tmp/v \
  && cmake -S /tmp/v -B /tmp/bv -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null \
  && cmake --build /tmp/bv -j 8 --target bench_arfusion > $R/build-base.log 2>&1; echo "base build rc=$?" > $R/base-rc.txt ) &
OUT=$R bash tools/device_check.sh build > $R/check-build.txt 2>&1; ts "build rc=$?"
wait; ts "$(cat $R/base-rc.txt)"
CTEST_ARGS="-L gpu" OUT=$R bash tools/device_check.sh tests > $R/check-tests.txt 2>&1; ts "tests: $(grep -E 'tests passed' $R/check-tests.txt)"
for i in 1 2 3; do
  timeout 60 /tmp/bv/benchmarks/bench_arfusion --benchmark_out=$R/gb-base-$i.json --benchmark_out_format=json > $R/gb-base-$i.txt 2>&1
  timeout 60 build-h200/benchmarks/bench_arfusion --benchmark_out=$R/gb-main-$i.json --benchmark_out_format=json > $R/gb-main-$i.txt 2>&1
done; ts gbench
python3 tools/gbtable.py $(for v in base main; do for i in 1 2 3; do echo $v=$R/gb-$v-$i.json; done; done) > $R/ab.txt 2>&1
SAN_TOOLS="memcheck racecheck synccheck" OUT=$R bash tools/device_check.sh sanitize > $R/check-san.txt 2>&1; ts "sanitize done"
tar czf $OUT/r.tgz -C $OUT r
tail -8 $R/check-tests.txt; grep -E "^(soak|process soak|timeout|peer skips|split fault)" $R/ctest.log | head; cat $R/check-san.txt
grep -E '^(nccl_path_fused|auto_fused|twoshot_allreduce|oneshot_allreduce|peer_store)/' $R/ab.txt
grep -h "row-blocks" $R/gb-main-1.txt | cut -c1-40,100-200 | head
