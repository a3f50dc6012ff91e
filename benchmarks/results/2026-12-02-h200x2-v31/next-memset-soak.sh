#!/usr/bin/env bash
# For the next GPU session (one H200 is enough, ~7 min): why the soak with memset nodes in its
# graph fails at 3-8 ranks sharing one GPU (README here; helper analysis in docs/PERF-NOTES.md,
# session 31: the failing call is the first call of the first graph replay, and the pattern is a
# late rank). Builds of test_gpu, each running LocalGroup.DISABLED_SoakWithMemsetNodesInTheGraph
# twice:
#   T = main + soak-time-graph-setup.patch (per-rank instantiate / first-launch times: a late
#       rank's first launch or instantiate taking ~the 5 s timeout says host-side stall)
#   T with CUDA_MODULE_LOADING=EAGER (passes: a lazy load in the late rank's graph setup)
#   S = main + soak-stage-graphs.patch (every rank's graph uploaded, then a barrier, before any
#       launch: passes = the test's staging is the fix, not the library)
#   P = main + pdl-after-non-kernel-node.patch (expected to fail like main: it does not touch the
#       stall; kept to close that question)
set -uo pipefail
export NCCL_NVLS_ENABLE=0
V=benchmarks/results/2026-12-02-h200x2-v31
mk() {
  local d=/tmp/arf-$1 p=$PWD/$V/$2; rm -rf $d; mkdir -p $d; cp -r CMakeLists.txt CMakePresets.json cmake include src tests $d/
  (cd $d && patch -p1 < $p > /dev/null) && cmake -S $d -B $d/b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_BENCHMARKS=OFF > $OUT/cfg-$1.log 2>&1 \
    && cmake --build $d/b -j 6 --target test_gpu > $OUT/build-$1.log 2>&1; echo "build $1 rc=$?"
}
mk T soak-time-graph-setup.patch &
mk S soak-stage-graphs.patch &
mk P pdl-after-non-kernel-node.patch &
wait
F='--gtest_also_run_disabled_tests --gtest_filter=Ranks/LocalGroup.DISABLED_Soak*'
for i in 1 2; do
  for v in T TE S P; do
    b=/tmp/arf-${v:0:1}/b/tests/test_gpu; envs=""; [ $v = TE ] && envs="CUDA_MODULE_LOADING=EAGER"
    env $envs timeout 150 $b $F > $OUT/repro-$v-$i.log 2>&1
    echo "== $v run $i rc=$? $(grep -cE '^\[       OK' $OUT/repro-$v-$i.log) of 4 ok"
    grep -E "soak timing" $OUT/repro-$v-$i.log | sort -t: -k3 -r | head -3
    grep -E "Which is" $OUT/repro-$v-$i.log | cut -c1-200 | head -3
  done
done
