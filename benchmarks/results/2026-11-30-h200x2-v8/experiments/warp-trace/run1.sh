#!/usr/bin/env bash
# Session 8, call 1: compact one-shot code (out-of-line-able waits, src loop not unrolled, 32-bit
# push index) vs HEAD: gbench A/B alternating, one-shot traces of both, GPU tests of the new tree.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
V7=$PWD/benchmarks/results/2026-11-30-h200x2-v7/final
# old tree = this tree with HEAD's src
rm -rf /tmp/oldt && mkdir -p /tmp/oldt && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools cmake /tmp/oldt/ && cp -r exp/old/src /tmp/oldt/src
( cd /tmp/oldt && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null && cmake --build b -j 12 --target bench_arfusion > build.log 2>&1; echo "old build rc=$?" ) > $R/build-old.txt 2>&1 &
( cd /tmp/oldt && bash $V7/build_trace1.sh /tmp/ot_old ) > $R/build-trace-old.txt 2>&1 &
bash $V7/build_trace1.sh /tmp/ot_new > $R/build-trace-new.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; tail -1 $R/build.txt
wait
cat $R/build-old.txt; tail -1 $R/build-trace-old.txt $R/build-trace-new.txt
B=build-h200
F='run/(nccl_path_fused|oneshot_fused|oneshot_allreduce|auto_fused)/(1/4096|4/4096|16/8192|128/8192|512/8192)/|run/(twoshot_fused|twoshot_allreduce|peer_store)/(512|2048|8192)/8192/'
for i in 1 2; do
  /tmp/oldt/b/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/old-$i.json --benchmark_out_format=json > $R/old-$i.txt 2>&1
  $B/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/new-$i.json --benchmark_out_format=json > $R/new-$i.txt 2>&1
done
python3 exp/gbtable.py old=$R/old-1.json new=$R/new-1.json old=$R/old-2.json new=$R/new-2.json > $R/table.txt; cat $R/table.txt
timeout 60 /tmp/ot_old/trace1 > $R/trace-old.txt 2>&1
timeout 60 /tmp/ot_new/trace1 > $R/trace-new.txt 2>&1
grep -h -A2 "^=== 1 x 4096" $R/trace-old.txt $R/trace-new.txt | cut -c1-200
tar czf $OUT/r.tgz -C $OUT r
timeout 240 ctest --test-dir $B --output-on-failure --timeout 230 -L gpu > $R/ctest.txt 2>&1
echo "ctest rc=$?"; grep -E "tests passed|FAILED|Failed" $R/ctest.txt | head
tar czf $OUT/r.tgz -C $OUT r
