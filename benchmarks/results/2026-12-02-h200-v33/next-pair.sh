#!/usr/bin/env bash
# For the next session with the H200 pair, first call (~8 min, timeout 580): session 31's call 1
# (every GPU ctest entry, the four compute-sanitizer tools, the lamportNextUnit fence A/B), which
# now also runs session 33's ThreadsNccl2.SpeedCheck* (the creation-time speed check forced on the
# pair, and one rank reporting a slow fused path), then those tests again verbosely, to keep Auto's
# picks under the check's table and how long creation took with it.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
bash benchmarks/results/2026-12-02-h200x2-v31/call1.sh
R=$OUT/r
for t in 'ThreadsNccl2.SelfCheck*' 'ThreadsNccl2.SpeedCheck*'; do
  s=$(( $(date +%s%N) / 1000000 ))
  ARFUSION_LOG=info timeout 60 build-h200/tests/test_gpu --gtest_filter="$t" >> $R/speedcheck.txt 2>&1
  echo "$t: rc=$? $(( $(date +%s%N) / 1000000 - s )) ms" | tee -a $R/speedcheck.txt
done
grep -E "creation check|speed check|OK|FAILED" $R/speedcheck.txt | head -20
tar czf $OUT/r.tgz -C $OUT r
