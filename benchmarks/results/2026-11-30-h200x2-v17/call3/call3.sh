#!/usr/bin/env bash
# Session 17 call 3: the two-shot's reduce-scatter push with kB packs loaded before any is stored
# (push-batch.patch, -DARF_EXP_PUSH_BATCH=kB; 1 = main). Bench-only builds for kB 1 and 4, a full
# build for kB 2 (the candidate): 3 rounds of the two-shot shapes, then every GPU ctest entry and
# compute-sanitizer (memcheck, racecheck, synccheck) on kB 2. Logs under $OUT/r, archive $OUT/r.tgz.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
for k in 1 4; do
  ( cmake -S . -B /tmp/b$k -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF \
      -DCMAKE_CUDA_FLAGS=-DARF_EXP_PUSH_BATCH=$k > /dev/null && cmake --build /tmp/b$k -j 8 --target bench_arfusion > $R/build-b$k.log 2>&1
    echo "b$k rc=$?" > $R/rc-b$k.txt ) &
done
CUDAFLAGS=-DARF_EXP_PUSH_BATCH=2 OUT=$R bash tools/device_check.sh build > $R/check-build.txt 2>&1; ts "build b2 rc=$?"
wait; ts "$(cat $R/rc-b1.txt $R/rc-b4.txt | tr '\n' ' ')"
grep -c "ARF_EXP_PUSH_BATCH=2" build-h200/build.ninja > $R/b2-flag-count.txt 2>&1
F='--benchmark_filter=(auto_fused|twoshot_allreduce)/(512|2048|8192)/(4096|8192)/1|peer_store/'
for i in 1 2 3; do for k in 1 2 4; do
  b=/tmp/b$k/benchmarks/bench_arfusion; [ $k = 2 ] && b=build-h200/benchmarks/bench_arfusion
  timeout 60 $b "$F" --benchmark_out=$R/gb-b$k-$i.json --benchmark_out_format=json > $R/gb-b$k-$i.txt 2>&1
done; done; ts gbench
python3 tools/gbtable.py $(for k in 1 2 4; do for i in 1 2 3; do echo b$k=$R/gb-b$k-$i.json; done; done) > $R/ab.txt 2>&1
cat $R/ab.txt
CTEST_ARGS="-L gpu" OUT=$R bash tools/device_check.sh tests > $R/check-tests.txt 2>&1; ts "tests b2: $(grep -E 'tests passed' $R/check-tests.txt)"
SAN_TOOLS="memcheck racecheck synccheck" SAN_LIMIT_S=90 OUT=$R bash tools/device_check.sh sanitize > $R/check-san.txt 2>&1; ts "sanitize b2: $(tr '\n' ' ' < $R/check-san.txt)"
tar czf $OUT/r.tgz -C $OUT r
tail -8 $R/check-tests.txt
