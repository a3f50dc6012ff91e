#!/usr/bin/env bash
# Session 31, one H200: the 3-8-rank LocalGroup soak failed (device mismatch/timeout) once the soak
# poisoned its outputs before each call (the 2-rank soak passed, as did every other test). Three
# builds of test_gpu side by side: A = the tree; B = the tree without the four poison memsets;
# C = the tree with lamportNextUnit's fence after the barrier only (as before 9c2e2c2). Two runs
# of the LocalGroup soaks each.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
V=benchmarks/results/2026-12-02-h200x2-v31
mk() {  # name, then a command run in the copy
  local d=/tmp/arf-$1; rm -rf $d; mkdir -p $d; cp -r CMakeLists.txt CMakePresets.json cmake include src tests benchmarks tools $d/
  (cd $d && eval "$2") && cmake -S $d -B $d/b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_BENCHMARKS=OFF > $OUT/cfg-$1.log 2>&1 \
    && cmake --build $d/b -j 6 --target test_gpu > $OUT/build-$1.log 2>&1; echo "build $1 rc=$?"
}
mk A true &
mk B "sed -i '/cudaMemsetAsync(\(res\|out\)_\(f\|r\)\.p, 0xf[ef]/d' tests/gpu_scenarios.cpp && ! grep -q 'res_f.p, 0xff' tests/gpu_scenarios.cpp" &
mk C "patch -p1 < $PWD/$V/fence-after-barrier-only.patch > /dev/null" &
wait
for i in 1 2; do
  for v in A B C; do
    timeout 150 /tmp/arf-$v/b/tests/test_gpu --gtest_filter='Ranks/LocalGroup.Soak*' > $OUT/soak-$v-$i.log 2>&1
    echo "== $v run $i rc=$? $(grep -cE '^\[       OK' $OUT/soak-$v-$i.log) ok"
    grep -E "Which is|cleared" $OUT/soak-$v-$i.log | cut -c1-400 | head -6
  done
done
