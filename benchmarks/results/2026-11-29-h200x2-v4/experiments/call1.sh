#!/usr/bin/env bash
# Device call 1 of session 4: new (pipelined two-shot, kVpt add-RMSNorm) against HEAD's kernels.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
rm -rf /tmp/old && mkdir -p /tmp/old && tar cf - --exclude=./build-h200 --exclude=./exp . | tar xf - -C /tmp/old
cp exp/old/twoshot.cu exp/old/rmsnorm.cu exp/old/norm_epilogue.cuh /tmp/old/src/kernels/
( cmake -S /tmp/old -B /tmp/old/b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF && cmake --build /tmp/old/b -j 12 ) > $R/build-old.log 2>&1 &
OUT=$R tools/device_check.sh build
wait; ts builds done; tail -2 $R/build-old.log
nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/norm_exp exp/norm_exp.cu && /tmp/norm_exp > $R/norm_exp.txt 2>&1; ts norm_exp; cat $R/norm_exp.txt | grep -E "median|device|regs" | awk '{$1=$1};1' | cut -c1-110
F='run/(peer_copy|nccl_path_fused|twoshot_fused|twoshot_allreduce|add_rmsnorm)/(1|128|512|2048|8192)/8192/1/'
gb() { $1 --benchmark_filter="$F" --benchmark_out=$R/$2.json --benchmark_out_format=json > $R/$2.txt 2>&1; ts $2; grep -E "^run" $R/$2.txt | awk '{print $1, $2}' | sed -E 's#run/##; s#/iterations.*##' | paste -sd' ' | fold -w 230; }
gb build-h200/benchmarks/bench_arfusion gb-new
gb /tmp/old/b/benchmarks/bench_arfusion gb-old
ARFUSION_WORKSPACE_MB=256 gb build-h200/benchmarks/bench_arfusion gb-new-ws256
ARFUSION_WORKSPACE_MB=32 gb build-h200/benchmarks/bench_arfusion gb-new-ws32
ctest --test-dir build-h200 --output-on-failure --timeout 200 -L gpu > $R/ctest.log 2>&1; ts ctest
grep -E "tests passed|Failed|FAILED|soak|\(Failed|Timeout" $R/ctest.log | head -30
tar czf $OUT/r.tgz -C $OUT r
