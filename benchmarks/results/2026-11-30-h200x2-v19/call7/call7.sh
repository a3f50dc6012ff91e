#!/usr/bin/env bash
# Session 19 call 7 (bench only, not landed: no device time left for the full tests and
# sanitizers). V6 = main + held-operands.patch: a one-row unit of the Lamport one-shot's cluster
# kernels (at most two vectors per thread) loads its input, residual and gamma into registers
# before its NVLink stores and sums its own input from them (call 6: loads issued after the
# stores waited ~1 us). gbench main/V6 x 3, and V6's Processes.SanitizeSmallShapes without a
# sanitizer (its cluster cases against float64 and the NCCL path).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=$PWD/benchmarks/results/2026-11-30-h200x2-v19/call7
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
mk() { rm -rf /tmp/$1 && mkdir /tmp/$1 && git ls-files -z | xargs -0 cp --parents -t /tmp/$1; }
mk A; mk V6; (cd /tmp/V6 && patch -p1 < $E/held-operands.patch > /dev/null)
( cmake -S /tmp/A -B /tmp/bA -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null \
  && cmake --build /tmp/bA -j 12 --target bench_arfusion > $R/build-A.log 2>&1; echo "A rc=$?" > $R/rc-A.txt ) &
( cmake -S /tmp/V6 -B /tmp/bV6 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release > /dev/null \
  && cmake --build /tmp/bV6 -j 20 --target bench_arfusion test_gpu_procs > $R/build-V6.log 2>&1; echo "V6 rc=$?" > $R/rc-V6.txt ) &
wait; ts "$(cat $R/rc-*.txt | tr '\n' ' ')"
for i in 1 2 3; do for v in A V6; do
  timeout 60 /tmp/b$v/benchmarks/bench_arfusion --benchmark_filter='(auto_fused|oneshot_fused|oneshot_allreduce|nccl_path_fused)/' --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
done; done; ts gbench
python3 tools/gbtable.py $(for v in A V6; do for i in 1 2 3; do echo $v=$R/gb-$v-$i.json; done; done) > $R/ab.txt 2>&1
timeout 60 /tmp/bV6/tests/test_gpu_procs --gtest_filter='Processes.SanitizeSmallShapes' > $R/v6-small-shapes.log 2>&1; ts "V6 small shapes rc=$?"
tar czf $OUT/r.tgz -C $OUT r
cat $R/times.txt; grep -E 'PASSED|FAILED' $R/v6-small-shapes.log | head -5
grep -E '^(auto_fused|oneshot_fused|oneshot_allreduce)/(1|4|8|16|32|64|128)/(4096|8192)/' $R/ab.txt | awk '{print $1, $2, $3, $4}'
