#!/usr/bin/env bash
# Session 31, one H200, after diag-soak.sh: the poisoned soak with every round eager (the graph is
# captured but never replayed). Passing here puts the failure in the graph replays.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
d=/tmp/arf-E; rm -rf $d; mkdir -p $d; cp -r CMakeLists.txt CMakePresets.json cmake include src tests $d/
sed -i 's|const int64_t eager_rounds = rounds / 8 + 1;|const int64_t eager_rounds = rounds;|' $d/tests/gpu_scenarios.cpp
grep -c 'eager_rounds = rounds;' $d/tests/gpu_scenarios.cpp
cmake -S $d -B $d/b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_BENCHMARKS=OFF > $OUT/cfg-E.log 2>&1 \
  && cmake --build $d/b -j 16 --target test_gpu > $OUT/build-E.log 2>&1; echo "build E rc=$?"
timeout 120 $d/b/tests/test_gpu --gtest_filter='Ranks/LocalGroup.Soak*' > $OUT/soak-E.log 2>&1
echo "== E rc=$? $(grep -cE '^\[       OK' $OUT/soak-E.log) ok"
grep -E "Which is|soak at" $OUT/soak-E.log | cut -c1-300 | head -8
