#!/usr/bin/env bash
# Builds a copy of the tree with the traced one-shot (oneshot-trace.patch, next to this script) and
# trace1.cpp against it. Run from the repository root. $1: output dir.
set -e
T=${1:-/tmp/ot}
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf $T && mkdir -p $T && cp -r CMakeLists.txt CMakePresets.json include src benchmarks tests tools cmake $T/
patch -d $T -p1 < $HERE/oneshot-trace.patch > /dev/null
cmake -S $T -B $T/b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > $T/cmake.log
cmake --build $T/b -j "$(nproc)" --target arfbench > $T/build.log 2>&1 || { tail -20 $T/build.log; exit 1; }
g++ -O2 -std=c++17 $HERE/trace1.cpp -I include -I benchmarks -I /usr/local/cuda/include -o $T/trace1 \
  $T/b/benchmarks/libarfbench.a $T/b/libarfusion.a -L /usr/local/cuda/lib64 -L /usr/local/cuda/lib64/stubs -lnccl -lcudart -lpthread -ldl -lrt
echo built $T/trace1
