#!/usr/bin/env bash
# Session 19 call 6 (trace only, nothing to land): main as landed + mk_trace2.py (call 1's marks
# plus 14 = the first vector's rank-order sum available and 15 = its residual available, each
# forced by a dependent mov), to see what the ~1.25 us from the push barrier to residual_out waits
# for at 1 x 4096.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=$PWD/benchmarks/results/2026-11-30-h200x2-v19/call6
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
rm -rf /tmp/T && mkdir /tmp/T && git ls-files -z | xargs -0 cp --parents -t /tmp/T
cp $E/trace19.cpp /tmp/T/benchmarks/ && python3 $E/mk_trace2.py /tmp/T
cmake -S /tmp/T -B /tmp/bT -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null \
  && cmake --build /tmp/bT -j 32 --target trace19 > $R/build.log 2>&1; ts "build rc=$?"
timeout 60 /tmp/bT/benchmarks/trace19 > $R/trace.txt 2>&1; ts "trace rc=$?"
cat $R/trace.txt | cut -c1-200 | head -80
