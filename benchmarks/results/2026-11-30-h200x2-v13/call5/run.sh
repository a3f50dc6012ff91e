#!/usr/bin/env bash
# Session 13, call 5: the landing candidate (split steps 3-5, two-shot steps of ~128 KiB per peer
# for rows <= 16 KB) vs HEAD: gbench A/B x2 (every path), sweeps 8-256 MB, every GPU ctest entry,
# memcheck/racecheck/synccheck.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
left() { echo $(( 585 - ($(date +%s) - T0) )); }
bb() { # name src-dir targets...
  local n=$1 s=$2; shift 2
  rm -rf /tmp/$n && mkdir -p /tmp/$n && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools cmake /tmp/$n/ && cp -r $s /tmp/$n/src && cd /tmp/$n \
  && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release > /dev/null \
  && cmake --build b -j 6 --target "$@" > build.log 2>&1; echo "$n build rc=$?"; tail -3 build.log; }
( bb head $PWD/exp/head/src bench_arfusion arfusion-bench ) > $R/build-head.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; tail -1 $R/build.txt
wait; cat $R/build-head.txt; ts builds
B=build-h200
for i in 1 2; do for v in head new; do
  b=/tmp/head/b; [ $v = new ] && b=$B
  timeout 90 $b/benchmarks/bench_arfusion --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1 || echo "$v-$i rc=$?"
done; done; ts gbench
python3 exp/gbtable.py head=$R/gb-head-1.json head=$R/gb-head-2.json new=$R/gb-new-1.json new=$R/gb-new-2.json > $R/ab.txt
grep -E "^(peer_store|nccl_path_fused|auto_fused|twoshot_fused|twoshot_allreduce|oneshot_fused)/" $R/ab.txt | grep -E "/(1|128|512|2048|8192)/(4096|8192)/1 "
tar czf $OUT/r.tgz -C $OUT r
for v in head new; do
  b=/tmp/head/b; [ $v = new ] && b=$B
  timeout 80 $b/benchmarks/arfusion-bench --hidden 4096,8192,16384 --dtypes bf16,fp32 --min-bytes 8388608 --max-bytes 268435456 --per-octave 1 --out $R/sweep-$v > $R/sweep-$v.txt 2>&1 || echo "sweep $v rc=$?"
done; ts sweeps
tar czf $OUT/r.tgz -C $OUT r
timeout 280 ctest --test-dir $B --output-on-failure --timeout 270 -L gpu -V > $R/ctest.log 2>&1; ts "ctest rc=$?"
grep -E "tests passed|^soak|process soak|all [0-9]+ kernels|FAILED|Failure|Test +#|late peer|timeout reported" $R/ctest.log | head -40
tar czf $OUT/r.tgz -C $OUT r
for tool in memcheck racecheck synccheck; do
  l=$(left); [ $l -gt 40 ] || break
  w=$(( l - 25 )); [ $w -gt 70 ] && w=70
  SAN_TOOLS=$tool SAN_WAIT_S=$w SAN_LIMIT_S=$(( w + 15 )) SAN_RACE_LIMIT_S=$(( w + 15 )) OUT=$R tools/device_check.sh sanitize 2>&1 | head -3; ts $tool
done
tar czf $OUT/r.tgz -C $OUT r
