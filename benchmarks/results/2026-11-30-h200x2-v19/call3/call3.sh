#!/usr/bin/env bash
# Session 19 call 3 (bench only). A = this tree (main a2b14ba + the Lamport kernels' header pushed
# after the rows). V4 = A + last-unit-two-rows.patch (the flag two-shot finishes its last unit's
# peer rows two at a time, one per half-block). V5 = V4 + lamport-two-rows.patch (the Lamport
# two-shot's step 3 likewise; spills 56-168 bytes). gbench A/V4/V5 x 3; arfusion-bench of A at
# narrow rows (hidden 1024, 2048, 2880; bf16; 256 KiB-4 MiB) x 2: one-shot against two-shot.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=$PWD/benchmarks/results/2026-11-30-h200x2-v19
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
mk() { rm -rf /tmp/$1 && mkdir /tmp/$1 && git ls-files -z | xargs -0 cp --parents -t /tmp/$1; }
bld() { cmake -S /tmp/$1 -B /tmp/b$1 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null \
  && cmake --build /tmp/b$1 -j 10 --target $2 > $R/build-$1.log 2>&1; echo "$1 rc=$?" > $R/rc-$1.txt; }
mk A; mk V4; mk V5
(cd /tmp/V4 && patch -p1 < $E/call3/last-unit-two-rows.patch > /dev/null)
(cd /tmp/V5 && patch -p1 < $E/call3/last-unit-two-rows.patch > /dev/null && patch -p1 < $E/call3/lamport-two-rows.patch > /dev/null)
( bld A "bench_arfusion arfusion-bench" ) & ( bld V4 bench_arfusion ) & ( bld V5 bench_arfusion ) & wait
ts "$(cat $R/rc-*.txt | tr '\n' ' ')"
for i in 1 2 3; do for v in A V4 V5; do
  timeout 60 /tmp/b$v/benchmarks/bench_arfusion --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
done; done; ts gbench
python3 tools/gbtable.py $(for v in A V4 V5; do for i in 1 2 3; do echo $v=$R/gb-$v-$i.json; done; done) > $R/ab.txt 2>&1
for i in 1 2; do
  timeout 90 /tmp/bA/benchmarks/arfusion-bench --hidden 1024,2048,2880 --dtypes bf16 --min-bytes 262144 --max-bytes 4194304 --out $R/sw-narrow-$i > $R/sw-narrow-$i.txt 2>&1
done; ts sweeps
tar czf $OUT/r.tgz -C $OUT r
cat $R/times.txt
grep -E '^(auto_fused|twoshot_fused|twoshot_allreduce|peer_store)/(512|2048|8192)/' $R/ab.txt | awk '{print $1, $2, $3, $4, $5}'
grep -E '^(auto_fused)/' $R/ab.txt | awk '{print $1, $2, $3, $4, $5}' | head -30
grep -E '^bf16 ' $R/sw-narrow-1.txt | awk '{print $1,$2,$3,$4,"one",$8,"two",$9,"auto",$10,$NF}'
