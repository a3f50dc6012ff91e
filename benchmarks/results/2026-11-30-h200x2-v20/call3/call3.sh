#!/usr/bin/env bash
# Session 20 call 3: the tree to land (main b87c82b + the one-block Lamport one-shot's held-operand
# kernels, kHeld: R == 1 units of ops with a residual; every other kernel's PTX is identical to
# b87c82b's). Full sm_90a build, every GPU ctest entry, compute-sanitizer memcheck, racecheck,
# synccheck and initcheck, then a same-call A/B of 3 gbench runs against b87c82b (this tree with
# held-kernels.patch reversed, bench only) and the main job's default sweep. Logs under $OUT/r.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=$PWD/benchmarks/results/2026-11-30-h200x2-v20/call3
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
git status --short > $R/tree.txt
( rm -rf /tmp/base && mkdir /tmp/base && git ls-files -z | xargs -0 cp --parents -t /tmp/base && (cd /tmp/base && patch -R -p1 < $E/held-kernels.patch > /dev/null) \
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
timeout 60 build-h200/benchmarks/arfusion-bench --out $R/sweep > $R/sweep.txt 2>&1; ts "sweep rc=$?"
tar czf $OUT/r.tgz -C $OUT r
cat $R/times.txt; tail -6 $R/check-tests.txt; grep -E "^(soak|process soak|timeout|peer skips|split fault|all [0-9]+ kernels)" $R/ctest.log | head; cat $R/check-san.txt
grep -E '^(nccl_path_fused|auto_fused|oneshot_fused|oneshot_allreduce|twoshot_allreduce|peer_store)/' $R/ab.txt | awk '{print $1, $2, $3, $4}'
tail -3 $R/sweep.txt
