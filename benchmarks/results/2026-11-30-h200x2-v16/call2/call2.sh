#!/usr/bin/env bash
# Session 16 call 2: two-shot step cap for 16 KB rows at 96/112/128/176 KiB (ARF_STEP_KIB, from
# exp/stepkib.patch; 128 = main's default), 3 rounds, 2048 and 8192 x 8192; SASS of main's one-shot.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
rm -rf /tmp/v && mkdir /tmp/v && git archive HEAD | tar x -C /tmp/v && (cd /tmp/v && git apply $OLDPWD/exp/stepkib.patch) \
 && cmake -S /tmp/v -B /tmp/bv -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null \
 && cmake --build /tmp/bv -j 16 --target bench_arfusion > $R/build.log 2>&1; ts "build rc=$?"
F='--benchmark_filter=(auto|twoshot)_(fused|allreduce)/(2048|8192)/8192|peer_store/8192'
for i in 1 2 3; do for k in 128 96 112 176; do
  ARF_STEP_KIB=$k timeout 60 /tmp/bv/benchmarks/bench_arfusion "$F" --benchmark_out=$R/gb-k$k-$i.json --benchmark_out_format=json > $R/gb-k$k-$i.txt 2>&1
done; done; ts gbench
python3 tools/gbtable.py $(for k in 128 96 112 176; do for i in 1 2 3; do echo k$k=$R/gb-k$k-$i.json; done; done) > $R/ab.txt 2>&1
cat $R/ab.txt
o=$(find /tmp/bv -name 'oneshot.cu.o' | head -1); cuobjdump -sass "$o" | gzip > $R/oneshot-sass.txt.gz; ts "sass $o"
tar czf $OUT/r.tgz -C $OUT r
