#!/usr/bin/env bash
# Session 19 call 2 (bench only). A = main (a2b14ba). V1 = A + header-after-rows.patch (the Lamport
# kernels push the call header after the rows, so warp 0's input load no longer waits for the
# epoch load behind thread 0's header store). V3 = V1 + residual-l1-prefetch.patch (the one-shot
# prefetches the first row's residual and gamma of each thread's vectors into L1 before the push).
# T = V3 + call1/mk_trace.py with this call's trace19.cpp (adds 128 x 8192). gbench A/V1/V3 x 3.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=$PWD/benchmarks/results/2026-11-30-h200x2-v19
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
mk() { rm -rf /tmp/$1 && mkdir /tmp/$1 && git ls-files -z | xargs -0 cp --parents -t /tmp/$1; }
bld() { cmake -S /tmp/$1 -B /tmp/b$1 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null \
  && cmake --build /tmp/b$1 -j 8 --target $2 > $R/build-$1.log 2>&1; echo "$1 rc=$?" > $R/rc-$1.txt; }
mk A; mk V1; mk V3; mk T
(cd /tmp/V1 && patch -p1 < $E/call2/header-after-rows.patch > /dev/null)
for t in V3 T; do (cd /tmp/$t && patch -p1 < $E/call2/header-after-rows.patch > /dev/null && patch -p1 < $E/call2/residual-l1-prefetch.patch > /dev/null); done
cp $E/call2/trace19.cpp /tmp/T/benchmarks/ && python3 $E/call1/mk_trace.py /tmp/T
( bld A bench_arfusion ) & ( bld V1 bench_arfusion ) & ( bld V3 bench_arfusion ) & ( bld T trace19 ) & wait
ts "$(cat $R/rc-*.txt | tr '\n' ' ')"
timeout 60 /tmp/bT/benchmarks/trace19 > $R/trace.txt 2>&1; ts "trace rc=$?"
for i in 1 2 3; do for v in A V1 V3; do
  timeout 60 /tmp/b$v/benchmarks/bench_arfusion --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
done; done; ts gbench
python3 tools/gbtable.py $(for v in A V1 V3; do for i in 1 2 3; do echo $v=$R/gb-$v-$i.json; done; done) > $R/ab.txt 2>&1
tar czf $OUT/r.tgz -C $OUT r
cat $R/times.txt
grep -E '^(auto_fused|oneshot_allreduce|twoshot_fused|twoshot_allreduce)/' $R/ab.txt | awk '{print $1, $2, $3, $4, $5}' | head -80
