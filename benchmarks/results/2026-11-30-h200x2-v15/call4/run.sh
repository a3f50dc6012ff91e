#!/usr/bin/env bash
# Session 15 call 4: the SplitFault tests of the tree to land, with their output (call 3 ran them
# inside ctest's gpu_threads, which keeps no output of passing tests; its own filter missed them).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
rm -rf /tmp/fin && mkdir /tmp/fin && git archive HEAD | tar x -C /tmp/fin && cd /tmp/fin && git apply $OLDPWD/exp/fin.patch \
  && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release > /dev/null \
  && cmake --build b -j 32 --target test_gpu > $R/build.log 2>&1; echo "build rc=$?"
timeout 60 b/tests/test_gpu --gtest_filter='*SplitFault*:*Faults.APeerThatSkips*' > $R/faults.log 2>&1; echo "split on rc=$?"
ARFUSION_TWO_SHOT_SPLIT=0 timeout 60 b/tests/test_gpu --gtest_filter='*SplitFault*' > $R/faults-nosplit.log 2>&1; echo "split off rc=$?"
grep -E "split fault|timeout reported|OK \]|FAILED|SKIPPED|PASSED" $R/faults.log $R/faults-nosplit.log
tar czf $OUT/r.tgz -C $OUT r
