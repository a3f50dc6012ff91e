#!/usr/bin/env bash
# Session 17 call 2: main with the pushScatter refactor: full sm_90a build, every GPU ctest entry,
# compute-sanitizer (memcheck, racecheck, synccheck), and a same-call A/B of 3 benchmark runs
# against cc7e147 (session 16's main, bench only). Logs under $OUT/r, archive $OUT/r.tgz.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
git log --oneline -1 > $R/commit.txt 2>&1
( rm -rf /tmp/v && mkdir /tmp/v && git archive cc7e147 | tar x -C /tmp/v \
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
OUT=$R bash tools/device_check.sh sanitize > $R/check-san.txt 2>&1; ts "sanitize: $(tr '\n' ' ' < $R/check-san.txt)"
tar czf $OUT/r.tgz -C $OUT r
cat $R/check-tests.txt | tail -12
grep -E '^(nccl_path_fused|auto_fused|twoshot_allreduce|oneshot_allreduce|peer_store)/' $R/ab.txt
