#!/usr/bin/env bash
# Session 16 call 1: builds head (git HEAD) and the working tree at ARF_EXP 1/4/5 (bench only),
# plus the working tree's full build (tests, ARF_EXP default 5); benchmarks A/B, 3 rounds;
# ARF_STEP64=1 on the e5 binary; decode sweeps head vs e5; GPU ctest of the working tree.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpus.txt 2>&1
mkb() {  # name, src dir, extra cuda flags
  (cmake -S $2 -B /tmp/b-$1 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF "-DCMAKE_CUDA_FLAGS=$3" > /dev/null \
    && cmake --build /tmp/b-$1 -j 6 --target bench_arfusion arfusion-bench > $R/build-$1.log 2>&1); echo "build $1 rc=$?"
}
rm -rf /tmp/head && mkdir /tmp/head && git archive HEAD | tar x -C /tmp/head
mkb head /tmp/head "" > $R/mk-head.txt 2>&1 &
mkb e1 $PWD "-DARF_EXP=1" > $R/mk-e1.txt 2>&1 &

mkb e5 $PWD "-DARF_EXP=5" > $R/mk-e5.txt 2>&1 &
(cmake -S . -B build-h200 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build build-h200 -j 8 > $R/build-full.log 2>&1; echo "full rc=$?" > $R/mk-full.txt) &
wait; ts "builds: $(cat $R/mk-*.txt | tr '\n' ' ')"
B() { timeout 60 /tmp/b-$1/benchmarks/bench_arfusion --benchmark_out=$R/gb-$2-$3.json --benchmark_out_format=json > $R/gb-$2-$3.txt 2>&1; }
for i in 1 2 3; do
  B head head $i; B e1 e1 $i; B e5 e5 $i; ARF_STEP64=1 B e5 s64 $i
done; ts gbench
python3 tools/gbtable.py $(for v in head e1 e5 s64; do for i in 1 2 3; do echo $v=$R/gb-$v-$i.json; done; done) > $R/ab.txt 2>&1
tar czf $OUT/r.tgz -C $OUT r
for v in head e5; do
  timeout 60 /tmp/b-$v/benchmarks/arfusion-bench --hidden 4096,8192 --dtypes bf16 --min-bytes 8192 --max-bytes 4194304 --per-octave 2 --out $R/sweep-$v > $R/sweep-$v.txt 2>&1; ts "sweep $v rc=$?"
done
tar czf $OUT/r.tgz -C $OUT r
timeout 280 ctest --test-dir build-h200 --output-on-failure --timeout 250 -L gpu > $R/ctest.log 2>&1; ts "ctest rc=$?"
tail -15 $R/ctest.log
tar czf $OUT/r.tgz -C $OUT r
cat $R/ab.txt | head -80
