#!/usr/bin/env bash
# Session 11, call 4: source prefetch (8) alone, with the next residual (4), two rows ahead (512), one barrier (1).
# 2 gamma of vector 1 early, 4 L2 prefetch of the next row's residual, 8 L2 prefetch of the next
# row's sources, 16 residuals of the unit's rows at its start, 32 (two-shot) peer rows' residuals
# while the all-gather is in flight. Two interleaved gbench runs per variant.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpus.txt 2>&1
V="0 8 12 520 9"
for e in $V; do
  ( cmake -S . -B build-e$e -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS="-DARF_EXP=$e" > $R/cfg-$e.log 2>&1 \
    && cmake --build build-e$e --target bench_arfusion -j 6 > $R/build-$e.log 2>&1; echo "build $e rc=$?" ) &
done
wait
F='run/(oneshot_fused/(1|16|128|256|512)|twoshot_(fused|allreduce)/(512|2048|8192))/(4096|8192)/1/'
args=""
for rep in 1 2; do
  for e in $V; do
    timeout 60 build-e$e/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-$e-$rep.json --benchmark_out_format=json > $R/gb-$e-$rep.txt 2>&1
    echo "run $e $rep rc=$?"
    args="$args e$e=$R/gb-$e-$rep.json"
  done
done
python3 exp/gbtable.py $args > $R/ab.txt
cat $R/ab.txt
tar czf $OUT/r.tgz -C $OUT r
timeout 30 build-e0/benchmarks/bench_arfusion --benchmark_filter='peer_store' > $R/peer-store.txt 2>&1; tail -4 $R/peer-store.txt
tar czf $OUT/r.tgz -C $OUT r
