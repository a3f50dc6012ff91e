#!/usr/bin/env bash
# Session 28, call 8 (H200 pair). Tree = ab2c334 + two-role.patch (call 7s: correct on one H200).
# One build; the same binary with ARFUSION_TWO_SHOT_FINISHERS unset (OFF: today's flag two-shot)
# and set to 8, 16, 24 and 33 finisher blocks, 3 rounds, at the flag two-shot's one-wave shapes
# (2048 x 4096 and 2048 x 8192; 8192 rows take several waves and stay as they are).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
cmake -S . -B build-h200 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > $R/build.log 2>&1 \
  && cmake --build build-h200 -j 32 --target bench_arfusion >> $R/build.log 2>&1; ts "build rc=$?"
F='^run/((auto_fused|twoshot_fused|twoshot_allreduce)/2048/(4096|8192)/1/|peer_store/2048/)'
args=""
for i in 1 2 3; do for v in OFF 8 16 24 33; do
  if [ $v = OFF ]; then unset ARFUSION_TWO_SHOT_FINISHERS; else export ARFUSION_TWO_SHOT_FINISHERS=$v; fi
  timeout 40 build-h200/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
  args="$args F$v=$R/gb-$v-$i.json"
done; done; ts gbench
unset ARFUSION_TWO_SHOT_FINISHERS
python3 tools/gbtable.py $args > $R/ab.txt 2>&1
tar czf $OUT/r.tgz -C $OUT r
cat $R/ab.txt; cat $R/times.txt
