#!/usr/bin/env bash
# Builds the per-warp traced one-shot (mk.py) and trace2 in $1. Run from the repository root.
set -e
T=${1:-/tmp/tr2}; HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf $T && mkdir -p $T && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools cmake $T/
python3 $HERE/mk.py $T
cmake -S $T -B $T/b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > $T/cmake.log
cmake --build $T/b -j "$(nproc)" --target arfbench > $T/build.log 2>&1 || { tail -20 $T/build.log; exit 1; }
g++ -O2 -std=c++17 $HERE/trace2.cpp -I include -I benchmarks -I /usr/local/cuda/include -o $T/trace2 \
  $T/b/benchmarks/libarfbench.a $T/b/libarfusion.a -L /usr/local/cuda/lib64 -L /usr/local/cuda/lib64/stubs -lnccl -lcudart -lpthread -ldl -lrt
echo built $T/trace2
