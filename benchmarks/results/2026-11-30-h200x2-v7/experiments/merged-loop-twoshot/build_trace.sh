#!/usr/bin/env bash
# Builds the library with the two-shot trace and exp/trace.cpp against it. $1: build dir.
set -e
BT=${1:-build-trace}
cmake -S . -B $BT -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-DARFUSION_TRACE -DARFUSION_BUILD_TESTS=OFF > /dev/null
cmake --build $BT -j "$(nproc)" --target arfbench > $BT.log 2>&1 || { tail -20 $BT.log; exit 1; }
g++ -O2 -std=c++17 exp/trace.cpp -I include -I benchmarks -I /usr/local/cuda/include -o $BT/trace \
  $BT/benchmarks/libarfbench.a $BT/libarfusion.a -L /usr/local/cuda/lib64 -L /usr/local/cuda/lib64/stubs -lnccl -lcudart -lpthread -ldl -lrt
echo built $BT/trace
