#!/usr/bin/env bash
# For the next session (one H200 is enough, ~6 min): does pdl-after-non-kernel-node.patch fix the
# open failure? M = main, P = main + the patch; each runs the disabled reproduction
# (LocalGroup.DISABLED_SoakWithMemsetNodesInTheGraph) twice; then every gpu_threads test on P.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
V=benchmarks/results/2026-12-02-h200x2-v31
mk() {
  local d=/tmp/arf-$1; rm -rf $d; mkdir -p $d; cp -r CMakeLists.txt CMakePresets.json cmake include src tests $d/
  (cd $d && eval "$2") && cmake -S $d -B $d/b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_BENCHMARKS=OFF > $OUT/cfg-$1.log 2>&1 \
    && cmake --build $d/b -j 8 --target test_gpu > $OUT/build-$1.log 2>&1; echo "build $1 rc=$?"
}
mk M true &
mk P "patch -p1 < $PWD/$V/pdl-after-non-kernel-node.patch > /dev/null" &
wait
for i in 1 2; do
  for v in M P; do
    timeout 150 /tmp/arf-$v/b/tests/test_gpu --gtest_also_run_disabled_tests --gtest_filter='Ranks/LocalGroup.DISABLED_Soak*' > $OUT/repro-$v-$i.log 2>&1
    echo "== $v run $i rc=$? $(grep -cE '^\[       OK' $OUT/repro-$v-$i.log) of 4 ok"
    grep -E "Which is" $OUT/repro-$v-$i.log | cut -c1-300 | head -4
  done
done
timeout 200 /tmp/arf-P/b/tests/test_gpu --gtest_filter=-ThreadsNccl2.* > $OUT/threads-P.log 2>&1; echo "P gpu_threads rc=$?"; tail -3 $OUT/threads-P.log
