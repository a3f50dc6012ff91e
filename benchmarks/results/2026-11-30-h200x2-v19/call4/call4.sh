#!/usr/bin/env bash
# Session 19 call 4: the tree to land (main a2b14ba + the Lamport kernels' header after the rows,
# the flag two-shot's last unit two rows at a time, the byte rule at 896 KiB). Full sm_90a build,
# every GPU ctest entry, compute-sanitizer memcheck, racecheck, synccheck and initcheck, then a
# same-call A/B of 3 gbench runs against 7cf2aba (session 18's main, bench only) and the main job's
# sweeps (default 116 sizes; other widths 8 KB-2 MiB). Logs under $OUT/r, archive $OUT/r.tgz.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
git rev-parse HEAD > $R/commit.txt; git status --short >> $R/commit.txt
( rm -rf /tmp/base && mkdir /tmp/base && git archive 7cf2aba | tar x -C /tmp/base \
  && cmake -S /tmp/base -B /tmp/bb -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null \
  && cmake --build /tmp/bb -j 8 --target bench_arfusion > $R/build-base.log 2>&1; echo "base build rc=$?" > $R/base-rc.txt ) &
OUT=$R bash tools/device_check.sh build > $R/check-build.txt 2>&1; ts "build rc=$?"
CTEST_ARGS="-L gpu" OUT=$R bash tools/device_check.sh tests > $R/check-tests.txt 2>&1; ts "tests: $(grep -E 'tests passed' $R/check-tests.txt)"
wait; ts "$(cat $R/base-rc.txt)"
tar czf $OUT/r.tgz -C $OUT r
SAN_TOOLS="memcheck racecheck synccheck initcheck" OUT=$R bash tools/device_check.sh sanitize > $R/check-san.txt 2>&1; ts "sanitize done"
tar czf $OUT/r.tgz -C $OUT r
for i in 1 2 3; do
  timeout 60 /tmp/bb/benchmarks/bench_arfusion --benchmark_out=$R/gb-base-$i.json --benchmark_out_format=json > $R/gb-base-$i.txt 2>&1
  timeout 60 build-h200/benchmarks/bench_arfusion --benchmark_out=$R/gb-main-$i.json --benchmark_out_format=json > $R/gb-main-$i.txt 2>&1
done; ts gbench
python3 tools/gbtable.py $(for v in base main; do for i in 1 2 3; do echo $v=$R/gb-$v-$i.json; done; done) > $R/ab.txt 2>&1
timeout 100 build-h200/benchmarks/arfusion-bench --out $R/sweep > $R/sweep.txt 2>&1; ts "sweep rc=$?"
timeout 100 build-h200/benchmarks/arfusion-bench --hidden 1024,2048,2880,5120,16384 --dtypes bf16,fp32 --max-bytes 2097152 \
  --out $R/sweep-small > $R/sweep-small.txt 2>&1; ts "sweep small rc=$?"
tar czf $OUT/r.tgz -C $OUT r
cat $R/times.txt; tail -6 $R/check-tests.txt; grep -E "^(soak|process soak|timeout|peer skips|split fault)" $R/ctest.log | head; cat $R/check-san.txt
grep -E '^(nccl_path_fused|auto_fused|twoshot_allreduce|oneshot_allreduce|peer_store)/' $R/ab.txt | awk '{print $1, $2, $3, $4}'
tail -3 $R/sweep.txt; tail -3 $R/sweep-small.txt
